"""Triton ``norm_pair_linear``: add-RMSNorm, a linear layer and its pairwise epilogue (RoPE or SiLU-and-mul) in one
launch, for the few rows of a draft pass. Semantics and checks: ``norm_pair_linear_ref.py``.

Why: a draft pass of a small model is a chain of ~85 dependent kernels that each cost ~3 us whatever their size. Per
Llama layer this kernel runs ``input norm + qkv + rope`` and ``post-attention norm + gate_up + silu_mul`` (6 kernels
a layer instead of 10). The norm weight is folded into the weights (W diag(g)), x and the residual go into two dots
as loaded, and the row scale rsqrt(mean(h^2) + eps) multiplies the accumulator: Triton stops streaming a tile that
passes through arithmetic on its way into the dot, so normalizing the input tile first is slower than norm + cuBLAS.
An 8-layer pycode-30m pass without attention takes 170 us at M = 8 on an H100, against 204 us for stand-ins of
SGLang's norm / rope / activation kernels + cuBLAS.

Grid ``(NPROG + 1, cdiv(M, BM))``. Program ``p < NPROG`` owns 2 BH weight rows that its epilogue pairs: for rope the
channels ``j0 .. j0+BH`` of both halves of one head (rows ``head*D + j`` and ``head*D + D/2 + j``), for silu_mul the
gate rows ``p*BH ..`` and the matching up rows ``+ N/2``; one dot ``acc^T [2BH, BM] = W_rows [2BH, K] x^T [K, BM]``
(weight rows as the MMA's M dimension, the batch padded only to 16), then the accumulator is split in its two halves.
Every such program first sums h^2 over K for its rows (x and the residual, L2-resident). Program ``NPROG`` stores
``x + residual`` (the next residual). Programmatic dependent launch (sgl_spec/kernels/common/pdl.py).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.norm_pair_linear.ref import check
from sgl_spec.kernels.common.pdl import _wait_prior, pdl_kwargs

MAX_BLOCK_M = 32  # rows a program takes; more rows get more programs (the H100 probe: BM = 64 was 10-15% slower)
BLOCK_K = 128
SQ_TILE = 8192  # elements of the [BM, BK1] tile of the h^2 pre-pass


def default_block_h(M: int) -> int:
    """Weight rows a program takes from each half: 16 from 9 to 32 rows (more programs for the few rows), else 32."""
    return 16 if 8 < M <= 32 else 32


@triton.jit
def _dot(w, x, acc, UPCAST: tl.constexpr):
    if UPCAST:  # the interpreter cannot dot bf16: fp32 operands hold the 16-bit values exactly
        return tl.dot(w.to(tl.float32), x.to(tl.float32), acc, input_precision="ieee")
    elif w.dtype == tl.float32:
        return tl.dot(w, x, acc, input_precision="ieee")
    else:
        return tl.dot(w, x, acc)


@triton.jit
def _h_tile(x_ptr, r_ptr, row_m, m_ok, k0, K, BK1: tl.constexpr, HAS_RES: tl.constexpr):
    """(h = x + residual in fp32 [BM, BK1], its offsets, its mask) for columns k0 .. k0+BK1 of the rows."""
    kk = k0 + tl.arange(0, BK1)
    at = row_m[:, None] + kk[None, :]
    msk = m_ok[:, None] & (kk < K)[None, :]
    h = tl.load(x_ptr + at, mask=msk, other=0.0).to(tl.float32)
    if HAS_RES:
        h += tl.load(r_ptr + at, mask=msk, other=0.0).to(tl.float32)
    return h, at, msk


@triton.jit(do_not_specialize=["M"])  # rows = the batch: its tile (BM) is the only variant it picks
def _norm_pair_linear_kernel(x_ptr, r_ptr, w_ptr, out_ptr, rout_ptr, pos_ptr, cs_ptr, M, K, s_w, s_out, eps,
                             NPROG, HALF_N, ROT_HEADS,
                             BM: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr, BK1: tl.constexpr,
                             HAS_RES: tl.constexpr, ROPE: tl.constexpr, HD: tl.constexpr,
                             UPCAST: tl.constexpr, PDL: tl.constexpr = False):
    pid = tl.program_id(0)
    offs_m = tl.program_id(1) * BM + tl.arange(0, BM)
    m_ok = offs_m < M
    row_m = offs_m.to(tl.int64) * K
    _wait_prior(PDL)
    if pid == NPROG:  # the next residual, x + residual (launched only with one)
        for k0 in range(0, K, BK1):
            h, at, msk = _h_tile(x_ptr, r_ptr, row_m, m_ok, k0, K, BK1, True)
            tl.store(rout_ptr + at, h.to(rout_ptr.dtype.element_ty), mask=msk)
    else:
        i2 = tl.arange(0, 2 * BH)
        if ROPE:
            PER: tl.constexpr = HD // 2 // BH
            head = pid // PER
            j0 = (pid % PER) * BH
            rows = head * HD + j0 + (i2 % BH) + (i2 // BH) * (HD // 2)
            rows_ok = rows >= 0
        else:
            j = pid * BH + (i2 % BH)
            rows = j + (i2 // BH) * HALF_N
            rows_ok = j < HALF_N
        # sum of h^2 per row, natural layout (the dot tiles below are transposed)
        ssq = tl.zeros([BM], tl.float32)
        for k0 in range(0, K, BK1):
            h, _, _ = _h_tile(x_ptr, r_ptr, row_m, m_ok, k0, K, BK1, HAS_RES)
            ssq += tl.sum(h * h, 1)
        w_row = w_ptr + rows.to(tl.int64)[:, None] * s_w
        acc = tl.zeros([2 * BH, BM], tl.float32)
        for k0 in range(0, K, BK):
            kk = k0 + tl.arange(0, BK)
            k_ok = kk < K
            w = tl.load(w_row + kk[None, :], mask=rows_ok[:, None] & k_ok[None, :], other=0.0)
            at = row_m[None, :] + kk[:, None]
            msk = m_ok[None, :] & k_ok[:, None]
            acc = _dot(w, tl.load(x_ptr + at, mask=msk, other=0.0), acc, UPCAST)
            if HAS_RES:  # W (x + r)^T as two dots: the loads go into the MMA untouched
                acc = _dot(w, tl.load(r_ptr + at, mask=msk, other=0.0), acc, UPCAST)
        acc = acc * tl.rsqrt(ssq / K + eps)[None, :]
        a, b = tl.split(tl.permute(tl.reshape(acc, (2, BH, BM)), (1, 2, 0)))  # [BH, BM]: first / second half rows
        o_m = out_ptr + offs_m.to(tl.int64)[None, :] * s_out
        if ROPE:
            jj = j0 + tl.arange(0, BH)
            pos = tl.load(pos_ptr + offs_m, mask=m_ok, other=0).to(tl.int64)
            cs = cs_ptr + pos[None, :] * HD + jj[:, None]
            rot = m_ok[None, :] & (head < ROT_HEADS)
            c = tl.load(cs, mask=rot, other=1.0).to(tl.float32)  # unrotated heads (values): cos 1, sin 0
            s = tl.load(cs + HD // 2, mask=rot, other=0.0).to(tl.float32)
            o = o_m + (head * HD + jj)[:, None]
            tl.store(o, (a * c - b * s).to(out_ptr.dtype.element_ty), mask=m_ok[None, :])
            tl.store(o + HD // 2, (b * c + a * s).to(out_ptr.dtype.element_ty), mask=m_ok[None, :])
        else:
            jj = pid * BH + tl.arange(0, BH)
            y = a / (1.0 + tl.exp(-a)) * b
            tl.store(o_m + jj[:, None], y.to(out_ptr.dtype.element_ty), mask=m_ok[None, :] & (jj < HALF_N)[:, None])


@dataclass(frozen=True)
class NormPairLaunch:
    """Fixed launch parameters for tests and benchmarks (``norm_pair_linear(..., launch=NormPairLaunch(...))``; a
    field left None takes the rules): ``block_h`` (weight rows a program takes from each half), ``block_m`` (rows a
    program), ``block_k`` (the reduction step)."""
    block_h: Optional[int] = None
    block_m: Optional[int] = None
    block_k: Optional[int] = None


def norm_pair_linear(x, residual, weight, eps, epilogue, out=None, residual_out=None, positions=None, cos_sin=None,
                     head_dim=None, rot_heads=0, launch: NormPairLaunch | None = None):
    """See ``norm_pair_linear_ref``. ``weight`` is W diag(g) (the norm weight folded in). Returns ``(out, residual)``.
    ``launch``: a NormPairLaunch fixing the launch (tests, benchmarks); None: the rules."""
    lc = launch or NormPairLaunch()
    shape = check(x, residual, weight, epilogue, out, residual_out, positions, cos_sin, head_dim, rot_heads)
    M, K = x.shape
    N = weight.shape[0]
    if out is None:
        out = torch.empty(shape, dtype=x.dtype, device=x.device)
    if residual is not None and residual_out is None:
        residual_out = torch.empty_like(x)
    res_new = x if residual is None else residual_out
    if M == 0:
        return out, res_new
    rope = epilogue == "rope"
    bh = int(lc.block_h or default_block_h(M))
    if rope:
        bh = min(bh, head_dim // 2)  # head_dim % 16 == 0: a power of two >= 8 that divides head_dim / 2
        while (head_dim // 2) % bh:
            bh //= 2
        nprog = N // head_dim * (head_dim // 2 // bh)
    else:
        nprog = triton.cdiv(N // 2, bh)
    bm = int(lc.block_m or min(max(16, triton.next_power_of_2(M)), MAX_BLOCK_M))
    bk = int(lc.block_k or BLOCK_K)
    bk1 = max(16, min(triton.next_power_of_2(K), SQ_TILE // bm))
    interp = os.environ.get("TRITON_INTERPRET", "0") == "1"
    _norm_pair_linear_kernel[(nprog + (residual is not None), triton.cdiv(M, bm))](
        x_ptr=x, r_ptr=x if residual is None else residual, w_ptr=weight, out_ptr=out,
        rout_ptr=x if residual_out is None else residual_out,
        pos_ptr=positions if rope else x, cs_ptr=cos_sin if rope else x, M=M, K=K, s_w=weight.stride(0),
        s_out=out.stride(0), eps=float(eps), NPROG=nprog, HALF_N=N // 2, ROT_HEADS=int(rot_heads),
        BM=bm, BH=bh, BK=bk, BK1=bk1, HAS_RES=residual is not None, ROPE=rope, HD=int(head_dim or 2),
        UPCAST=interp and x.dtype != torch.float32, num_warps=4, num_stages=3, **pdl_kwargs(x.device),
    )
    return out, res_new
