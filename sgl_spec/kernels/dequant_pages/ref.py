"""Pure-torch twin of ``dequant_pages`` (contract in __init__.py)."""
from __future__ import annotations

import torch

from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref


def check(store, pages, out_k, out_v, dtype):
    """Shapes and dtypes of a call; returns the output shape."""
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"dequant_pages: dtype must be float16 or bfloat16, got {dtype}")
    if pages.dim() != 1 or pages.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"dequant_pages: pages must be a 1-d int32/int64 tensor, got {tuple(pages.shape)} {pages.dtype}")
    _, H, P, half = store.k_upper.shape
    shape = (pages.numel(), P, H, 2 * half)
    for name, o in (("out_k", out_k), ("out_v", out_v)):
        if o is not None and (tuple(o.shape) != shape or o.dtype != dtype or not o.is_contiguous()):
            raise ValueError(f"dequant_pages: {name} must be a contiguous {shape} {dtype} tensor, got "
                             f"{tuple(o.shape)} {o.dtype}")
    return shape


def dequant_pages(store, pages: torch.Tensor, out_k=None, out_v=None, dtype=torch.float16):
    check(store, pages, out_k, out_v, dtype)
    p = pages.long()
    k = dequant_keys_ref(store.k_upper[p], store.k_lower[p], store.k_scale[p], store.k_zero[p], False)
    v = dequant_values_ref(store.v_upper[p], store.v_lower[p], store.v_scale[p], store.v_zero[p], False)
    k, v = k.transpose(1, 2).to(dtype), v.transpose(1, 2).to(dtype)
    if out_k is None:
        out_k = k.contiguous()
    else:
        out_k.copy_(k)
    if out_v is None:
        out_v = v.contiguous()
    else:
        out_v.copy_(v)
    return out_k, out_v
