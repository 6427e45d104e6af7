"""``w4a16_linear``, Triton engine: ``x [M, K] @ W.T`` for small M (draft passes: M = batch rows ≤ 64) reading ref.py's
format directly - the packed codes ``[K/8, N] int32`` and the scales ``[K/GROUP, N]``.

A program owns ``BLOCK_N`` output columns and every K: per group of GROUP input channels it loads GROUP/8 words a
column (coalesced along N), unpacks the eight nibbles of each word into GROUP rows of codes, scales them into fp16 /
bf16 weights in registers and multiplies the activations' [BLOCK_M, GROUP] tile by them (fp32 accumulation). No
split over K, so no atomics: the result of a row does not depend on the launch (draft graphs and eager drafts agree).
The weights are read once per BLOCK_M rows of x, so the launch streams the 4-bit copy; its speed is what the GPU
benchmark (bench/bench_w4a16.py) measures against Marlin and the copy bandwidth.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.w4a16_linear.ref import GROUP, PACK, ZERO


@triton.jit
def _w4a16_kernel(x_ptr, q_ptr, s_ptr, b_ptr, out_ptr, M, N, K,
                  stride_xm, stride_qk, stride_sk, stride_om,
                  HAS_BIAS: tl.constexpr, GROUP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    WORDS: tl.constexpr = GROUP_K // 8
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_w = tl.arange(0, WORDS)
    offs_k = tl.arange(0, GROUP_K)
    shifts = (tl.arange(0, 8) * 4).to(tl.int32)
    m_ok = offs_m < M
    n_ok = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for g in range(0, K // GROUP_K):
        k0 = g * GROUP_K
        xs = tl.load(x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + (k0 + offs_k)[None, :],
                     mask=m_ok[:, None], other=0.0)
        words = tl.load(q_ptr + (g * WORDS + offs_w)[:, None].to(tl.int64) * stride_qk + offs_n[None, :],
                        mask=n_ok[None, :], other=0)  # [WORDS, BLOCK_N]
        codes = (words[:, None, :] >> shifts[None, :, None]) & 0xF  # [WORDS, 8, BLOCK_N]: k = word * 8 + nibble
        codes = tl.reshape(codes, (GROUP_K, BLOCK_N))
        scale = tl.load(s_ptr + g * stride_sk + offs_n, mask=n_ok, other=0.0).to(tl.float32)
        w = ((codes.to(tl.float32) - 8.0) * scale[None, :]).to(xs.dtype)
        acc += tl.dot(xs, w)
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :],
             acc.to(out_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def block_m(M: int) -> int:
    """Rows of x a program multiplies: the dot's minimum 16, up to 64 (a draft batch)."""
    return max(16, min(64, triton.next_power_of_2(M)))


def w4a16_linear(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, bias=None, out=None,
                 block_n: int = 64) -> torch.Tensor:
    """x [..., K] (fp16 / bf16, last dim contiguous) -> [..., N] in x's dtype; qweight [K/8, N] int32, scales
    [K/GROUP, N] (both contiguous in N)."""
    K8, N = qweight.shape
    K = K8 * PACK
    if x.shape[-1] != K or x.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"x must be [..., {K}] fp16 / bf16, got {tuple(x.shape)} {x.dtype}")
    if qweight.dtype != torch.int32 or scales.shape != (K // GROUP, N) or qweight.stride(1) != 1 or scales.stride(1) != 1:
        raise ValueError(f"qweight [K/8, N] int32 and scales [K/{GROUP}, N], contiguous in N; got "
                         f"{tuple(qweight.shape)} {qweight.dtype}, {tuple(scales.shape)}")
    x2 = x.reshape(-1, K)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    M = x2.shape[0]
    if out is None:
        out = torch.empty((*x.shape[:-1], N), dtype=x.dtype, device=x.device)
    if out.shape != (*x.shape[:-1], N) or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {(*x.shape[:-1], N)} {x.dtype}")
    o2 = out.view(-1, N)
    if M == 0:
        return out
    BM = block_m(M)
    grid = (triton.cdiv(N, block_n), triton.cdiv(M, BM))
    _w4a16_kernel[grid](x2, qweight, scales, bias if bias is not None else scales, o2, M, N, K,
                        x2.stride(0), qweight.stride(0), scales.stride(0), o2.stride(0),
                        HAS_BIAS=bias is not None, GROUP_K=GROUP, BLOCK_M=BM, BLOCK_N=block_n)
    return out


assert ZERO == 8  # the kernel's "- 8.0" is ref.py's zero code
