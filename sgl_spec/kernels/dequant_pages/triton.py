"""Triton ``dequant_pages`` (contract in __init__.py): grid ``(n, Hkv, P / BP)``; a program turns BP tokens of one
(page, head) into K and V rows of the ``[n, P, Hkv, D]`` output. A packed byte j holds channel j (low nibble) and
channel j + D/2 (high nibble), so every tile is handled as those two halves. fp32 arithmetic in the twin's order,
launched with ``enable_fp_fusion=False`` so no multiply-add is contracted: the output has the twin's bits."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.dequant_pages.ref import check


@triton.jit
def _dequant_kernel(pages_ptr, ku_ptr, kl_ptr, ks_ptr, kz_ptr, vu_ptr, vl_ptr, vs_ptr, vz_ptr, ok_ptr, ov_ptr,
                    H: tl.constexpr, P: tl.constexpr, HALF: tl.constexpr, BH: tl.constexpr, BP: tl.constexpr,
                    OUT_BF16: tl.constexpr):
    i, h, tb = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    page = tl.load(pages_ptr + i).to(tl.int64)
    t = tb * BP + tl.arange(0, BP)  # tokens of the page
    j = tl.arange(0, BH)  # byte = channel pair (j, j + HALF)
    jm = j < HALF
    mask = (t < P)[:, None] & jm[None, :]
    plane = (page * H + h) * (P * HALF) + t[:, None].to(tl.int64) * HALF + j[None, :]
    chan = (page * H + h) * (2 * HALF)
    tok = (page * H + h) * P + t
    # output row (i, t, h): [n, P, H, D]
    orow = ((i.to(tl.int64) * P + t[:, None].to(tl.int64)) * H + h) * (2 * HALF) + j[None, :]
    dt = tl.bfloat16 if OUT_BF16 else tl.float16
    # keys: scale / zero per channel
    up = tl.load(ku_ptr + plane, mask=mask, other=0).to(tl.int32)
    lo = tl.load(kl_ptr + plane, mask=mask, other=0).to(tl.int32)
    s_a = tl.load(ks_ptr + chan + j, mask=jm, other=0.0).to(tl.float32) * 0.0625
    s_b = tl.load(ks_ptr + chan + HALF + j, mask=jm, other=0.0).to(tl.float32) * 0.0625
    z_a = tl.load(kz_ptr + chan + j, mask=jm, other=0.0).to(tl.float32)
    z_b = tl.load(kz_ptr + chan + HALF + j, mask=jm, other=0.0).to(tl.float32)
    c_a = ((up & 0xF) * 16 + (lo & 0xF)).to(tl.float32) - 7.5
    c_b = ((up >> 4) * 16 + (lo >> 4)).to(tl.float32) - 7.5
    tl.store(ok_ptr + orow, (z_a[None, :] + s_a[None, :] * c_a).to(dt, fp_downcast_rounding="rtne"), mask=mask)
    tl.store(ok_ptr + orow + HALF, (z_b[None, :] + s_b[None, :] * c_b).to(dt, fp_downcast_rounding="rtne"), mask=mask)
    # values: scale / zero per token
    up = tl.load(vu_ptr + plane, mask=mask, other=0).to(tl.int32)
    lo = tl.load(vl_ptr + plane, mask=mask, other=0).to(tl.int32)
    s = tl.load(vs_ptr + tok, mask=t < P, other=0.0).to(tl.float32)[:, None] * 0.0625
    z = tl.load(vz_ptr + tok, mask=t < P, other=0.0).to(tl.float32)[:, None]
    c_a = ((up & 0xF) * 16 + (lo & 0xF)).to(tl.float32) - 7.5
    c_b = ((up >> 4) * 16 + (lo >> 4)).to(tl.float32) - 7.5
    tl.store(ov_ptr + orow, (z + s * c_a).to(dt, fp_downcast_rounding="rtne"), mask=mask)
    tl.store(ov_ptr + orow + HALF, (z + s * c_b).to(dt, fp_downcast_rounding="rtne"), mask=mask)


def dequant_pages(store, pages: torch.Tensor, out_k=None, out_v=None, dtype=torch.float16):
    shape = check(store, pages, out_k, out_v, dtype)
    for name in ("k_upper", "k_lower", "v_upper", "v_lower", "k_scale", "k_zero", "v_scale", "v_zero"):
        if not getattr(store, name).is_contiguous():
            raise ValueError(f"dequant_pages: store.{name} must be contiguous")
    out_k = torch.empty(shape, dtype=dtype, device=pages.device) if out_k is None else out_k
    out_v = torch.empty(shape, dtype=dtype, device=pages.device) if out_v is None else out_v
    n, P, H, D = shape
    if n == 0:
        return out_k, out_v
    BP = min(32, triton.next_power_of_2(P))
    _dequant_kernel[(n, H, triton.cdiv(P, BP))](
        pages, store.k_upper, store.k_lower, store.k_scale, store.k_zero, store.v_upper, store.v_lower,
        store.v_scale, store.v_zero, out_k, out_v, H=H, P=P, HALF=D // 2, BH=triton.next_power_of_2(D // 2), BP=BP,
        OUT_BF16=dtype == torch.bfloat16, enable_fp_fusion=False)
    return out_k, out_v
