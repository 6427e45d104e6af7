"""add_rmsnorm_linear (Triton): SGLang's fused residual-add RMSNorm and the linear layer after it, in one launch.

Why: a draft pass of a small model is a chain of ~85 dependent kernels of 1-5 us, and in a CUDA graph each one costs
about its own latency plus a launch gap whatever its size (H200: a chain of 8 layers' GEMMs and elementwise kernels at
batch 32 runs ~3 us a kernel, bench/results/s19/dev_linear.json). Folding the norm before the qkv and gate_up
projections into the GEMM removes two kernels a layer. Every program computes the norm of its BM rows as it streams
them (K = hidden size: a few KB from L2) instead of waiting for a separate norm kernel; programs of the first column
also write ``x + residual``, which the next layer's norm adds to. Reference and semantics: norm_linear_ref.py.

GEMM part as kernels/skinny_linear.py (``out^T [BN, BM] = W [BN, K] h^T [K, BM]``, fp32 accumulation, programmatic
dependent launch with the first weight chunk loaded before waiting). Used by draft passes only
(sgl_spec/draft_layers.py): the verify pass keeps SGLang's kernels, so losslessness does not depend on this.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.norm_linear_ref import check
from sgl_spec.kernels.pdl import _wait_prior, pdl_kwargs
from sgl_spec.kernels.skinny_linear import CONFIG, ELEMWISE_TILE, LARGE_N, MAX_M, _dot


@triton.jit
def _norm_chunk(x_ptr, r_ptr, rout_ptr, nw_ptr, offs_m, m_ok, kk, K, write_res, HAS_RES: tl.constexpr,
                WRITE_RES: tl.constexpr):
    """Columns kk of the rows: (h^T [BK, BM] = (r * norm_weight) in the model dtype, r^2 [BK, BM] in fp32),
    r = x + residual in fp32; programs with ``write_res`` store r (rounded) as the new residual."""
    k_ok = kk < K
    msk = m_ok[None, :] & k_ok[:, None]
    at = offs_m.to(tl.int64)[None, :] * K + kk[:, None]
    r = tl.load(x_ptr + at, mask=msk, other=0.0).to(tl.float32)
    if HAS_RES:
        r += tl.load(r_ptr + at, mask=msk, other=0.0).to(tl.float32)
        if WRITE_RES:
            tl.store(rout_ptr + at, r.to(rout_ptr.dtype.element_ty), mask=msk & write_res)
    g = tl.load(nw_ptr + kk, mask=k_ok, other=0.0).to(tl.float32)
    return (r * g[:, None]).to(x_ptr.dtype.element_ty), r * r


@triton.jit
def _add_rmsnorm_linear_kernel(x_ptr, r_ptr, nw_ptr, w_ptr, s_wn, b_ptr, out_ptr, rout_ptr, M, N, K, eps,
                               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                               HAS_RES: tl.constexpr, WRITE_RES: tl.constexpr, HAS_BIAS: tl.constexpr,
                               WEIGHTS_FIRST: tl.constexpr, UPCAST: tl.constexpr = False, PDL: tl.constexpr = False):
    # One pass over K: the row scale rsqrt(mean(r^2) + eps) is the same for every k, so it multiplies the dot's
    # result instead of its input (out = rrms * (W (r * g)^T)): no dependent first pass for the sum of squares.
    # (SGLang rounds r * rrms * g to the model dtype, this rounds r * g: a different rounding of the same product,
    # which a draft can afford; norm_linear_ref.py keeps SGLang's order, the tests allow one rounding's worth.)
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_k = tl.arange(0, BK)
    n_ok = offs_n < N
    m_ok = offs_m < M
    w_row = w_ptr + offs_n.to(tl.int64)[:, None] * s_wn
    write_res = pid_n == 0  # x, residual and residual_out are contiguous [M, K]
    acc = tl.zeros([BN, BM], tl.float32)
    # r^2 accumulated elementwise and reduced once after the loop: a reduction over K inside the loop is a
    # cross-warp exchange every chunk (H200 chain probe: that form cost ~3-4 us more than the plain GEMM)
    ssq = tl.zeros([BK, BM], tl.float32)
    if WEIGHTS_FIRST:  # the weights are not written by the kernel ahead of us: load them before waiting
        w0 = tl.load(w_row + offs_k[None, :], mask=n_ok[:, None] & (offs_k < K)[None, :], other=0.0)
        _wait_prior(PDL)
        h, sq = _norm_chunk(x_ptr, r_ptr, rout_ptr, nw_ptr, offs_m, m_ok, offs_k, K, write_res, HAS_RES, WRITE_RES)
        acc = _dot(w0, h, acc, UPCAST)
        ssq += sq
    else:
        _wait_prior(PDL)
    K0: tl.constexpr = BK if WEIGHTS_FIRST else 0
    for k0 in range(K0, K, BK):
        kk = k0 + offs_k
        w = tl.load(w_row + kk[None, :], mask=n_ok[:, None] & (kk < K)[None, :], other=0.0)
        h, sq = _norm_chunk(x_ptr, r_ptr, rout_ptr, nw_ptr, offs_m, m_ok, kk, K, write_res, HAS_RES, WRITE_RES)
        acc = _dot(w, h, acc, UPCAST)
        ssq += sq
    acc = acc * tl.rsqrt(tl.sum(ssq, 0) / K + eps)[None, :]
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[:, None]
    o = out_ptr + offs_m.to(tl.int64)[None, :] * N + offs_n[:, None]
    tl.store(o, acc.to(out_ptr.dtype.element_ty), mask=n_ok[:, None] & m_ok[None, :])


def add_rmsnorm_linear(x: torch.Tensor, residual, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
                       bias=None, out=None, residual_out=None, block_n=None, block_k=None, num_warps=None,
                       num_stages=None, weights_first=True):
    """(y, residual_new): see norm_linear_ref.py. ``residual=None`` (a model's first layer): no add, and the
    residual returned is x itself. With a residual, ``residual_out`` (allocated if None) receives x + residual; it
    must not alias either input."""
    check(x, residual, norm_weight, weight, bias, out, residual_out, MAX_M)
    M, K = x.shape
    N = weight.shape[0]
    if out is None:
        out = torch.empty(M, N, dtype=x.dtype, device=x.device)
    if residual is not None and residual_out is None:
        residual_out = torch.empty_like(x)
    if M == 0 or N == 0:
        if residual is not None and M:
            residual_out.copy_((x.float() + residual.float()).to(x.dtype))
        return out, (x if residual is None else residual_out)
    bn, bk, nw, ns = CONFIG["large_n" if N >= LARGE_N else "small_n"]
    bm = max(16, triton.next_power_of_2(M))
    bn, bk = int(block_n or bn), int(block_k or min(bk, ELEMWISE_TILE // bm))
    grid = (triton.cdiv(N, bn), triton.cdiv(M, bm))
    _add_rmsnorm_linear_kernel[grid](
        x_ptr=x, r_ptr=residual if residual is not None else x, nw_ptr=norm_weight, w_ptr=weight,
        s_wn=weight.stride(0), b_ptr=bias if bias is not None else weight, out_ptr=out,
        rout_ptr=residual_out if residual_out is not None else x, M=M, N=N, K=K, eps=float(eps),
        BM=bm, BN=bn, BK=bk, HAS_RES=residual is not None,
        WRITE_RES=residual is not None, HAS_BIAS=bias is not None, WEIGHTS_FIRST=bool(weights_first),
        UPCAST=x.dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET", "0") == "1",
        num_warps=int(num_warps or nw), num_stages=int(num_stages or ns), **pdl_kwargs(x.device),
    )
    return out, (x if residual is None else residual_out)
