"""Page-aligned token-slot allocation on CPU without Triton.

SGLang 0.5.17's ``PagedTokenToKVPoolAllocator`` (``mem_cache/allocator/paged.py``) allocates with Triton kernels
(``alloc_extend_kernel`` / ``alloc_decode_kernel``) on every device. On a CPU-only machine Triton has no driver, so any
``--page-size > 1`` dies on the first request - SGLang's own CPU backends use page size 1. quantspec needs pages of
32-128 tokens, so on CPU we swap in the same allocator with torch implementations of those two methods (the extend
one is SGLang's own ``alloc_extend_naive``, which its NPU allocator uses too). Same state, same free-page order,
same outputs; only the two methods differ.

Target: ``KVCacheConfigurator._build_token_to_kv_pool_allocator`` (AROUND): when quantspec is on and the device is
CPU, the allocator it built gets this subclass. ``apply()`` is idempotent.
"""
from __future__ import annotations

import functools

import torch

TARGET = "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._build_token_to_kv_pool_allocator"
_APPLIED = False


@functools.lru_cache(maxsize=None)
def _allocator_classes():
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator, alloc_extend_naive
    from sglang.srt.utils import get_num_new_pages

    class CPUPagedTokenToKVPoolAllocator(PagedTokenToKVPoolAllocator):
        def alloc_extend(self, prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens,
                         num_new_pages=None):
            if num_new_pages is None:
                num_new_pages = get_num_new_pages(seq_lens=seq_lens_cpu, page_size=self.page_size,
                                                  prefix_lens=prefix_lens_cpu)
            if self.need_sort and num_new_pages > len(self.free_pages):
                self.merge_and_sort_free()
            if num_new_pages > len(self.free_pages):  # checked first: the torch version indexes free_pages directly
                return None
            out = torch.empty((extend_num_tokens,), dtype=torch.int64, device=self.device)
            alloc_extend_naive(prefix_lens, seq_lens, last_loc, self.free_pages, out, self.page_size, self.device)
            self.free_pages = self.free_pages[num_new_pages:]
            return out

        def alloc_decode(self, seq_lens, seq_lens_cpu, last_loc):
            num_new_pages = get_num_new_pages(seq_lens=seq_lens_cpu, page_size=self.page_size, decode=True)
            if self.need_sort and num_new_pages > len(self.free_pages):
                self.merge_and_sort_free()
            if num_new_pages > len(self.free_pages):
                return None
            # the new token's position is seq_len - 1: it opens a page when (seq_len - 1) % P == 0
            need = (seq_lens % self.page_size == 1).to(torch.int64)
            out = (last_loc + 1).to(torch.int64)
            if num_new_pages:
                first = torch.cumsum(need, 0) - need
                new = self.free_pages[first.clamp(max=len(self.free_pages) - 1)] * self.page_size
                out = torch.where(need.bool(), new, out)
            self.free_pages = self.free_pages[num_new_pages:]
            return out

    return PagedTokenToKVPoolAllocator, CPUPagedTokenToKVPoolAllocator


def _around(original, self, *args, **kwargs):
    allocator = original(self, *args, **kwargs)
    from sgl_spec.config import get_config

    if self.device == "cpu" and get_config(self.server_args) is not None:
        base, cpu_cls = _allocator_classes()
        if type(allocator) is base:
            allocator.__class__ = cpu_cls
    return allocator


def apply() -> None:
    global _APPLIED
    if _APPLIED:
        return
    _APPLIED = True
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, _around, HookType.AROUND)
