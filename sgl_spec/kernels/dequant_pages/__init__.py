"""``dequant_pages``: the INT8 view of some pages of a layer's PageStore as full-precision K/V in FA3's paged layout
``[n, P, Hkv, D]`` (the prefill's transient copy, sgl_spec/kernels/extend_attention/fa3.py). Value of an element:
``zero + scale / 16 * (upper * 16 + lower - 7.5)`` in fp32, rounded once to the output dtype (the view of
docs/CONTRACTS.md). The Triton engine in ``triton.py``, the pure-torch twin in ``ref.py``; both give the same bits."""
import torch

from sgl_spec.kernels.engine import use_triton


def dequant_pages(store, pages: torch.Tensor, out_k=None, out_v=None, dtype=torch.float16):
    """``pages`` [n] (int32/int64, physical pages of ``store``) -> (K, V) ``[n, P, Hkv, D]`` in ``dtype`` (fp16 or
    bf16), written into ``out_k`` / ``out_v`` where given."""
    if use_triton(pages):
        from sgl_spec.kernels.dequant_pages.triton import dequant_pages as impl
    else:
        from sgl_spec.kernels.dequant_pages.ref import dequant_pages as impl
    return impl(store, pages, out_k=out_k, out_v=out_v, dtype=dtype)
