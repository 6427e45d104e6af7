"""skinny_linear (Triton): ``x @ weight.T (+ bias)`` for the few rows of a draft pass (M = the batch, <= 128).

Why: a pycode-30m draft pass at batch 32 runs 32 linear layers of ~0.5-3 MB of weights each, and cuBLAS took ~3.7 us
for each (H200 profile of a 15k x 32 round, bench/results/profile/kprof_s14_spec_15k_b32.txt: 125 of the pass's 358 us),
most of it latency: its tiles put 64 weight rows and the whole K range on one CTA, so a 1 MB GEMM keeps 64 of 132 SMs
streaming 64 KB each. Here a program owns BN (16-64) weight rows, the output is computed transposed (``out^T [BN, BM]
= W [BN, K] x^T [K, BM]``, so the weight rows are the MMA's M dimension and the batch pads only to 16), and the
launch uses programmatic dependent launch (kernels/pdl.py): the weights do not depend on the previous kernel, so with
WEIGHTS_FIRST the first K-chunk of the weights is loaded before ``griddepcontrol.wait`` and only x waits.

Numerics: fp32 accumulation of the products of the stored 16-bit operands (the products are exact), one rounding to
the output dtype, as cuBLAS; the summation order differs, so outputs may differ from cuBLAS in the last bit. It is
only used for draft passes, whose tokens the verify pass (cuBLAS) checks: losslessness never depends on it.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.pdl import _wait_prior, pdl_kwargs
from sgl_spec.kernels.skinny_linear_ref import check

MAX_M = 128  # rows one launch takes; larger batches belong to cuBLAS (the caller dispatches)
# (BN, BK, num_warps, num_stages) per weight-row count; tuned on the GPU (bench/dev_linear.py, bench/NOTES_kernels.md)
CONFIG = {"small_n": (16, 128, 4, 3), "large_n": (32, 128, 4, 3)}
LARGE_N = 2048
# The fused kernels (norm_linear.py, act_linear.py) compute on their [BK, BM] input tile in fp32 before the dot: BK is
# capped so that tile stays at ELEMWISE_TILE elements (32 fp32 registers a thread at 4 warps; H200 chain probe at
# M = 64, BK = 512: 85 us a step from spills, against 3 us for the plain GEMM).
ELEMWISE_TILE = 4096


@triton.jit
def _dot(w, x, acc, UPCAST: tl.constexpr):
    if UPCAST:  # the interpreter cannot dot bf16: fp32 operands hold bf16 values exactly
        return tl.dot(w.to(tl.float32), x.to(tl.float32), acc, input_precision="ieee")
    elif w.dtype == tl.float32:
        return tl.dot(w, x, acc, input_precision="ieee")
    else:
        return tl.dot(w, x, acc)


@triton.jit
def _skinny_linear_kernel(x_ptr, s_xm, w_ptr, s_wn, b_ptr, out_ptr, s_om, M, N, K,
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
    x_col = x_ptr + offs_m.to(tl.int64)[None, :] * s_xm
    acc = tl.zeros([BN, BM], tl.float32)
    if WEIGHTS_FIRST:
        # the weights are not written by the kernel ahead of us: start their first chunk before waiting for it
        w0 = tl.load(w_row + offs_k[None, :], mask=n_ok[:, None] & (offs_k < K)[None, :], other=0.0)
        _wait_prior(PDL)
        x0 = tl.load(x_col + offs_k[:, None], mask=m_ok[None, :] & (offs_k < K)[:, None], other=0.0)
        acc = _dot(w0, x0, acc, UPCAST)
    else:
        _wait_prior(PDL)
    K0: tl.constexpr = BK if WEIGHTS_FIRST else 0
    for k0 in range(K0, K, BK):
        kk = k0 + offs_k
        k_ok = kk < K
        w = tl.load(w_row + kk[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)
        x = tl.load(x_col + kk[:, None], mask=m_ok[None, :] & k_ok[:, None], other=0.0)
        acc = _dot(w, x, acc, UPCAST)
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[:, None]
    o = out_ptr + offs_m.to(tl.int64)[None, :] * s_om + offs_n[:, None]
    tl.store(o, acc.to(out_ptr.dtype.element_ty), mask=n_ok[:, None] & m_ok[None, :])


def skinny_linear(x: torch.Tensor, weight: torch.Tensor, bias=None, out=None, block_n=None, block_k=None,
                  num_warps=None, num_stages=None, weights_first=True) -> torch.Tensor:
    """``x [..., K] @ weight[N, K].T + bias[N]`` for at most MAX_M rows of x. Keywords override the launch
    configuration (tuning: bench/dev_linear.py)."""
    check(x, weight, bias, out, MAX_M)
    lead = x.shape[:-1]
    K = x.shape[-1]
    N = weight.shape[0]
    x2 = x.reshape(-1, K)
    M = x2.shape[0]
    if out is None:
        out = torch.empty(*lead, N, dtype=x.dtype, device=x.device)
    o2 = out.view(-1, N)
    if M == 0 or N == 0:
        return out
    bn, bk, nw, ns = CONFIG["large_n" if N >= LARGE_N else "small_n"]
    bn, bk = int(block_n or bn), int(block_k or bk)
    bm = max(16, triton.next_power_of_2(M))
    grid = (triton.cdiv(N, bn), triton.cdiv(M, bm))
    _skinny_linear_kernel[grid](
        x_ptr=x2, s_xm=x2.stride(0), w_ptr=weight, s_wn=weight.stride(0), b_ptr=bias if bias is not None else weight,
        out_ptr=o2, s_om=o2.stride(0), M=M, N=N, K=K, BM=bm, BN=bn, BK=bk, HAS_BIAS=bias is not None,
        WEIGHTS_FIRST=bool(weights_first),
        UPCAST=x.dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET", "0") == "1", num_warps=int(num_warps or nw), num_stages=int(num_stages or ns),
        **pdl_kwargs(x.device),
    )
    return out
