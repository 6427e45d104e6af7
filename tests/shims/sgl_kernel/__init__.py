"""Test-only stand-in for the `sgl_kernel` package on CPU machines. Never installed for users.

Why: SGLang 0.5.17's CPU engine (SGLANG_USE_CPU_ENGINE=1) imports a handful of `*_cpu` ops from `sgl_kernel` at
module import time (mem_cache/allocation.py, kernels/ops/{kvcache,speculative}/*, speculative/{spec_utils,
eagle_utils,eagle_worker_common,ngram_worker}.py), and PyPI has no CPU build of sgl-kernel. The harness puts
tests/shims on the server's PYTHONPATH so these pure-torch versions are found instead.

What is real here: the ops below, with the semantics of sgl-kernel's CPU/CUDA sources (see _cache_ops/_tree_ops).
Anything else imported from `sgl_kernel` resolves to a stub that raises NotImplementedError when *called*, so a
module that merely imports a CUDA-only name still loads, and a code path that really needs it fails loudly with
the op's name. No `torch.ops.sgl_kernel` ops are registered on purpose: SGLang probes
`torch.ops.sgl_kernel.convert_weight_packed` to decide on its Intel-AMX backend, which must stay off here.
"""
from ._cache_ops import (
    assign_draft_cache_locs_contiguous_cpu,
    assign_extend_cache_locs_cpu,
    assign_req_to_token_pool_cpu,
    copy_all_layer_kv_cache_cpu,
    fill_accept_out_cache_loc_cpu,
)
from ._tree_ops import (
    build_tree_kernel_efficient_cpu,
    fill_bonus_tokens_cpu,
    reconstruct_indices_from_tree_mask,
    rotate_input_ids_cpu,
    verify_tree_greedy_cpu,
)

__version__ = "0.0.0+cpu-test-shim"

IMPLEMENTED = (
    "assign_draft_cache_locs_contiguous_cpu",
    "assign_extend_cache_locs_cpu",
    "assign_req_to_token_pool_cpu",
    "build_tree_kernel_efficient_cpu",
    "copy_all_layer_kv_cache_cpu",
    "fill_accept_out_cache_loc_cpu",
    "fill_bonus_tokens_cpu",
    "reconstruct_indices_from_tree_mask",
    "rotate_input_ids_cpu",
    "verify_tree_greedy_cpu",
)


def _not_implemented(name):
    def op(*args, **kwargs):
        raise NotImplementedError(f"sgl_kernel.{name} has no pure-torch stand-in in tests/shims (CPU test shim)")

    op.__name__ = name
    return op


def __getattr__(name):
    # Dunder/private lookups (import machinery, pickle, inspect) must keep failing normally.
    if name.startswith("_"):
        raise AttributeError(name)
    return _not_implemented(name)
