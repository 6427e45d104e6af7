"""ring_write: the new tokens' K and V into the hot ring in one launch (Triton).

A decode or draft forward writes one token per request and layer; two index_puts (K, V) were two launches a layer
of a forward that is launch-bound on small models (a draft pass of pycode-30m is ~160 kernels of 1-4 us). One
program copies one token's K and V rows (H*D channels each) to ``rows[t]``. Layout and semantics:
sgl_spec/kernels/ring_write/ref.py.
"""
from __future__ import annotations

import triton
import triton.language as tl

from sgl_spec.kernels.common.pdl import _wait_prior, pdl_kwargs
from sgl_spec.kernels.ring_write.ref import check


@triton.jit(do_not_specialize=["T"])  # the row count follows the batch: one variant for all
def _ring_write_kernel(HK, HV, ROWS, K, V, T, s_kt, s_kh, s_vt, s_vh, H: tl.constexpr, D: tl.constexpr,
                       BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, PDL: tl.constexpr = False):
    _wait_prior(PDL)
    t = tl.program_id(0)
    row = tl.load(ROWS + t).to(tl.int64)
    h = tl.arange(0, BLOCK_H)[:, None]
    d = tl.arange(0, BLOCK_D)[None, :]
    ok = (h < H) & (d < D)
    t64 = t.to(tl.int64)
    kx = tl.load(K + t64 * s_kt + h * s_kh + d, mask=ok)
    vx = tl.load(V + t64 * s_vt + h * s_vh + d, mask=ok)
    dst = row * (H * D) + h * D + d
    tl.store(HK + dst, kx.to(HK.dtype.element_ty), mask=ok)
    tl.store(HV + dst, vx.to(HV.dtype.element_ty), mask=ok)


def ring_write(hot_k, hot_v, rows, k, v):
    check(hot_k, hot_v, rows, k, v)
    T = rows.shape[0]
    if T == 0:
        return
    H, D = hot_k.shape[-2:]
    _ring_write_kernel[(T,)](
        HK=hot_k, HV=hot_v, ROWS=rows, K=k, V=v, T=T,
        s_kt=k.stride(0), s_kh=k.stride(1), s_vt=v.stride(0), s_vh=v.stride(1),
        H=H, D=D, BLOCK_H=triton.next_power_of_2(H), BLOCK_D=triton.next_power_of_2(D), num_warps=4,
        **pdl_kwargs(hot_k.device),
    )
