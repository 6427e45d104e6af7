"""silu_mul_linear (Triton): SGLang's SiluAndMul and the down projection after it, in one launch.

Why: one kernel less per layer in a draft pass, whose cost is a chain of small dependent kernels (see
kernels/norm_linear.py). Each program forms ``silu(g) * u`` (fp32, rounded to the model dtype, as SGLang's kernel) for
its rows chunk by chunk while it streams its weight rows. GEMM part as kernels/skinny_linear.py. Draft passes only
(sgl_spec/draft_layers.py). Reference: act_linear_ref.py.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.act_linear_ref import check
from sgl_spec.kernels.pdl import _wait_prior, pdl_kwargs
from sgl_spec.kernels.skinny_linear import CONFIG, ELEMWISE_TILE, LARGE_N, MAX_M, _dot


@triton.jit
def _act_chunk(gu_ptr, offs_m, m_ok, kk, I):
    """a^T [BK, BM]: columns kk of silu(g) * u in the model dtype (gu rows are contiguous [2I])."""
    msk = m_ok[None, :] & (kk < I)[:, None]
    at = offs_m.to(tl.int64)[None, :] * (2 * I) + kk[:, None]
    g = tl.load(gu_ptr + at, mask=msk, other=0.0).to(tl.float32)
    u = tl.load(gu_ptr + at + I, mask=msk, other=0.0).to(tl.float32)
    return (g / (1.0 + tl.exp(-g)) * u).to(gu_ptr.dtype.element_ty)


@triton.jit
def _silu_mul_linear_kernel(gu_ptr, w_ptr, s_wn, b_ptr, out_ptr, M, N, I,
                            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, HAS_BIAS: tl.constexpr,
                            WEIGHTS_FIRST: tl.constexpr, UPCAST: tl.constexpr = False, PDL: tl.constexpr = False):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_k = tl.arange(0, BK)
    n_ok = offs_n < N
    m_ok = offs_m < M
    w_row = w_ptr + offs_n.to(tl.int64)[:, None] * s_wn
    acc = tl.zeros([BN, BM], tl.float32)
    if WEIGHTS_FIRST:  # the weights are not written by the kernel ahead of us
        w0 = tl.load(w_row + offs_k[None, :], mask=n_ok[:, None] & (offs_k < I)[None, :], other=0.0)
        _wait_prior(PDL)
        acc = _dot(w0, _act_chunk(gu_ptr, offs_m, m_ok, offs_k, I), acc, UPCAST)
    else:
        _wait_prior(PDL)
    K0: tl.constexpr = BK if WEIGHTS_FIRST else 0
    for k0 in range(K0, I, BK):
        kk = k0 + offs_k
        w = tl.load(w_row + kk[None, :], mask=n_ok[:, None] & (kk < I)[None, :], other=0.0)
        acc = _dot(w, _act_chunk(gu_ptr, offs_m, m_ok, kk, I), acc, UPCAST)
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[:, None]
    o = out_ptr + offs_m.to(tl.int64)[None, :] * N + offs_n[:, None]
    tl.store(o, acc.to(out_ptr.dtype.element_ty), mask=n_ok[:, None] & m_ok[None, :])


def silu_mul_linear(gu: torch.Tensor, weight: torch.Tensor, bias=None, out=None, block_n=None, block_k=None,
                    num_warps=None, num_stages=None, weights_first=True) -> torch.Tensor:
    """``(silu(g) * u) @ weight.T + bias`` with ``g, u = gu.chunk(2, -1)``; gu [M, 2I], weight [N, I]."""
    check(gu, weight, bias, out, MAX_M)
    M, I = gu.shape[0], gu.shape[1] // 2
    N = weight.shape[0]
    if out is None:
        out = torch.empty(M, N, dtype=gu.dtype, device=gu.device)
    if M == 0 or N == 0:
        return out
    bn, bk, nw, ns = CONFIG["large_n" if N >= LARGE_N else "small_n"]
    bm = max(16, triton.next_power_of_2(M))
    bn, bk = int(block_n or bn), int(block_k or min(bk, ELEMWISE_TILE // bm))
    _silu_mul_linear_kernel[(triton.cdiv(N, bn), triton.cdiv(M, bm))](
        gu_ptr=gu, w_ptr=weight, s_wn=weight.stride(0), b_ptr=bias if bias is not None else weight, out_ptr=out,
        M=M, N=N, I=I, BM=bm, BN=bn, BK=bk, HAS_BIAS=bias is not None, WEIGHTS_FIRST=bool(weights_first),
        UPCAST=gu.dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET", "0") == "1",
        num_warps=int(num_warps or nw), num_stages=int(num_stages or ns), **pdl_kwargs(gu.device),
    )
    return out
