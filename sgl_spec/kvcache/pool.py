"""quantspec's KV pool: what SGLang holds instead of ``MHATokenToKVPool`` when quantspec is on.

Per layer it owns
* the quantized pages (``kvformat.PageStore``): page id = SGLang slot // P, ``size // P + 1`` pages because SGLang's
  page 0 holds the padding slots that dummy tokens write to (its allocator hands out pages 1 … size//P);
* the full-precision hot ring ``hot_k``/``hot_v`` ``[num_slots, R, P, Hkv, D]`` in the model dtype, slot =
  ``req_pool_idx`` (``num_slots`` = rows of ``req_to_token``, row 0 being SGLang's padding request).

Nothing here computes: the attention backend (backend.py) writes the ring and quantizes completed pages. The pool
only allocates, answers SGLang's bookkeeping questions (sizes, memory) and refuses the features whose meaning is
"copy token slots around" (HiCache, disaggregation, CPU offload): a quantized page is not a set of token rows.

Memory: SGLang sizes the pool from bytes per token (``cell_size_bytes``, ≈ 8.4 bits per element instead of 16 for
bf16) and treats the rings (and the backend's page-score buffer) as fixed overhead (``fixed_overhead_bytes``),
subtracted from the budget before it is divided by the cell size.
"""
from __future__ import annotations

import logging
import math
from typing import Optional

import torch

from sgl_spec.config import HOT_RING_PAGES
from sgl_spec.kvcache.format import KVFormat, PageStore

logger = logging.getLogger(__name__)


def cell_size_bytes(fmt: KVFormat, num_layers: int) -> int:
    """Bytes one token costs in the page store over all layers (rounded up, as SGLang divides by it)."""
    return math.ceil(fmt.bytes_per_token_per_layer() * num_layers)


def ring_bytes(fmt: KVFormat, num_layers: int, num_slots: int, dtype: torch.dtype) -> int:
    elem = torch.empty((), dtype=dtype).element_size()
    return 2 * num_slots * HOT_RING_PAGES * fmt.page_size * fmt.num_kv_heads * fmt.head_dim * elem * num_layers


def score_bytes(fmt: KVFormat, num_layers: int, max_bs: int, max_context_len: int) -> int:
    """The backend's per-layer page-score buffer ``[L, max_bs, Hkv, MAXP]`` fp32 (speculative sparse draft only)."""
    return 4 * num_layers * max_bs * fmt.num_kv_heads * -(-max_context_len // fmt.page_size)


def _kv_cache_base():
    from sglang.srt.mem_cache.memory_pool import KVCache

    return KVCache


class QuantSpecKVPool(_kv_cache_base()):
    def __init__(
        self,
        size: int,
        page_size: int,
        dtype: torch.dtype,
        head_num: int,
        head_dim: int,
        layer_num: int,
        device: str,
        enable_memory_saver: bool,
        num_slots: int,
        start_layer: Optional[int] = None,
        end_layer: Optional[int] = None,
    ):
        from sglang.srt.constants import GPU_MEMORY_TYPE_KV_CACHE

        super().__init__(size, page_size, dtype, layer_num, device, enable_memory_saver, start_layer, end_layer)
        if size % page_size:
            raise ValueError(f"quantspec pool size {size} is not a multiple of the page size {page_size}")
        self.fmt = KVFormat(page_size, head_num, head_dim)
        self.head_num, self.head_dim, self.v_head_dim = head_num, head_dim, head_dim
        self.num_pages = size // page_size + 1
        self.num_slots = num_slots
        ring_shape = (num_slots, HOT_RING_PAGES, page_size, head_num, head_dim)
        with self.memory_saver_adapter.region(GPU_MEMORY_TYPE_KV_CACHE):
            self.pages: list[PageStore] = [self.fmt.alloc(self.num_pages, device) for _ in range(layer_num)]
            self.hot_k = [torch.zeros(ring_shape, dtype=dtype, device=device) for _ in range(layer_num)]
            self.hot_v = [torch.zeros(ring_shape, dtype=dtype, device=device) for _ in range(layer_num)]
        self._finalize_allocation_log(size)

    # ---- what the backend reads ----------------------------------------------------------------------------------
    def page_store(self, layer_id: int) -> PageStore:
        return self.pages[layer_id - self.start_layer]

    def hot(self, layer_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        i = layer_id - self.start_layer
        return self.hot_k[i], self.hot_v[i]

    # ---- accounting --------------------------------------------------------------------------------------------------
    def page_bytes(self) -> tuple[int, int]:
        k = v = 0
        for s in self.pages:
            k += sum(t.numel() * t.element_size() for t in (s.k_upper, s.k_lower, s.k_scale, s.k_zero))
            v += sum(t.numel() * t.element_size() for t in (s.v_upper, s.v_lower, s.v_scale, s.v_zero))
        return k, v

    def get_kv_size_bytes(self):
        k, v = self.page_bytes()
        ring = sum(t.numel() * t.element_size() for t in self.hot_k)
        return k + ring, v + ring

    def _finalize_allocation_log(self, num_tokens: int):
        k, v = self.page_bytes()
        ring = 2 * sum(t.numel() * t.element_size() for t in self.hot_k)
        per_tok = (k + v) / max(1, self.num_pages * self.page_size)
        dense = 2 * self.head_num * self.head_dim * self.layer_num * torch.empty((), dtype=self.dtype).element_size()
        self.mem_usage = (k + v + ring) / (1 << 30)
        logger.info(
            "quantspec KV cache allocated: #tokens %d, pages %.3f GB (%.1f bytes/token = %.2f bits/element; a "
            "%s cache needs %d bytes/token: %.2fx as many tokens fit), hot rings %.3f GB for %d request slots",
            num_tokens, (k + v) / (1 << 30), per_tok, 8 * per_tok / (2 * self.head_num * self.head_dim * self.layer_num),
            self.dtype, dense, dense / per_tok, ring / (1 << 30), self.num_slots,
        )

    # ---- the rest of SGLang's KVCache interface --------------------------------------------------------------------
    def _no(self, what: str):
        raise NotImplementedError(
            f"{what} is not supported with quantspec: its KV cache is quantized INT4/INT4 pages plus per-request "
            "full-precision rings, not per-token K/V rows"
        )

    def get_key_buffer(self, layer_id: int):
        self._no("reading K as token rows (an attention backend other than quantspec)")

    def get_value_buffer(self, layer_id: int):
        self._no("reading V as token rows (an attention backend other than quantspec)")

    def get_kv_buffer(self, layer_id: int):
        self._no("reading K/V as token rows (an attention backend other than quantspec)")

    def set_kv_buffer(self, layer, loc, cache_k, cache_v, *args, **kwargs):
        self._no("writing K/V by slot outside the quantspec attention backend")

    def move_kv_cache(self, tgt_loc, src_loc):
        self._no("moving KV slots (EAGLE-style accepted-token compaction)")

    def get_cpu_copy(self, indices, *args, **kwargs):
        self._no("offloading a request's KV to CPU (retraction/pause with offload)")

    def load_cpu_copy(self, kv_cache_cpu, indices, *args, **kwargs):
        self._no("loading a request's KV from CPU")

    def get_contiguous_buf_infos(self):
        self._no("PD disaggregation KV transfer")

    def get_raw_kv_buffer(self, *args, **kwargs):
        self._no("raw KV buffer access")
