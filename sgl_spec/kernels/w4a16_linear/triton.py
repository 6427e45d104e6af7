"""``w4a16_linear``, Triton engine: ``x [M, K] @ W.T`` for small M (draft passes: M = batch rows ≤ 64), streaming the
4-bit codes from a layout of its own.

Layout (``prepare``): ref.py's codes ``[K/8, N] int32`` cut into column blocks of ``block_n`` and stored block after
block, ``tiles [ceil(N/block_n), K/8, block_n]`` (the last block zero-padded), so the codes a program reads form one
contiguous run of ``K/2 · block_n`` bytes instead of ``K/8`` rows ``4 · N`` bytes apart. Scales stay ``[K/GROUP, N]``.

A program owns ``block_n`` output columns and every K, ``block_k`` input channels (whole groups) an iteration: it
loads ``block_k/8`` words a column, unpacks their nibbles into ``block_k`` code rows, scales each group into fp16 /
bf16 weights in registers and multiplies the activations' ``[BLOCK_M, block_k]`` tile by them (fp32 accumulation);
``num_stages`` iterations of loads are in flight. No split over K, so no atomics: a row's result does not depend on
the launch (draft graphs and eager drafts agree). The block sizes bench/bench_w4a16.py sweeps against Marlin and the
copy bandwidth on the GPU; ``BLOCK_N``/``BLOCK_K`` are the defaults.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.w4a16_linear.ref import GROUP, PACK, ZERO

BLOCK_N = 32
BLOCK_K = 512


@dataclass
class TritonWeight:
    tiles: torch.Tensor  # [ceil(N / block_n), K / 8, block_n] int32
    scales: torch.Tensor  # [K / GROUP, N]
    n: int
    k: int
    block_n: int

    @property
    def nbytes(self) -> int:
        return self.tiles.nbytes + self.scales.nbytes


def prepare(qweight: torch.Tensor, scales: torch.Tensor, block_n: int = BLOCK_N) -> TritonWeight:
    """ref.py's (qweight [K/8, N] int32, scales [K/GROUP, N]) -> the column-block layout."""
    K8, N = qweight.shape
    if qweight.dtype != torch.int32 or scales.shape != (K8 * PACK // GROUP, N):
        raise ValueError(f"qweight [K/8, N] int32 and scales [K/{GROUP}, N], got {tuple(qweight.shape)} "
                         f"{qweight.dtype}, {tuple(scales.shape)}")
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"block_n must be a power of two ≥ 16, got {block_n}")
    nb = triton.cdiv(N, block_n)
    padded = torch.zeros(K8, nb * block_n, dtype=torch.int32, device=qweight.device)
    padded[:, :N] = qweight
    tiles = padded.view(K8, nb, block_n).transpose(0, 1).contiguous()
    return TritonWeight(tiles, scales.contiguous(), N, K8 * PACK, block_n)


@triton.jit
def _w4a16_kernel(x_ptr, t_ptr, s_ptr, b_ptr, out_ptr, M, N, K,
                  stride_xm, stride_tb, stride_sk, stride_om,
                  HAS_BIAS: tl.constexpr, GROUP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    WORDS: tl.constexpr = BLOCK_K // 8
    GROUPS: tl.constexpr = BLOCK_K // GROUP_K
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_j = tl.arange(0, BLOCK_N)
    offs_n = pid_n * BLOCK_N + offs_j
    offs_w = tl.arange(0, WORDS)
    offs_k = tl.arange(0, BLOCK_K)
    offs_g = tl.arange(0, GROUPS)
    shifts = (tl.arange(0, 8) * 4).to(tl.int32)
    m_ok = offs_m < M
    n_ok = offs_n < N
    tile = t_ptr + pid_n.to(tl.int64) * stride_tb  # this program's codes: [K/8, BLOCK_N], contiguous
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        xs = tl.load(x_rows + (k0 + offs_k)[None, :], mask=m_ok[:, None], other=0.0)
        words = tl.load(tile + ((k0 // 8 + offs_w) * BLOCK_N)[:, None] + offs_j[None, :])  # padded: no mask
        codes = (words[:, None, :] >> shifts[None, :, None]) & 0xF  # [WORDS, 8, BLOCK_N]: k = word * 8 + nibble
        codes = tl.reshape(codes, (GROUPS, GROUP_K, BLOCK_N))
        scale = tl.load(s_ptr + (k0 // GROUP_K + offs_g)[:, None].to(tl.int64) * stride_sk + offs_n[None, :],
                        mask=n_ok[None, :], other=0.0).to(tl.float32)  # [GROUPS, BLOCK_N]
        w = (codes.to(tl.float32) - 8.0) * scale[:, None, :]
        acc += tl.dot(xs, tl.reshape(w, (BLOCK_K, BLOCK_N)).to(xs.dtype))
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :],
             acc.to(out_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def block_m(M: int) -> int:
    """Rows of x a program multiplies: the dot's minimum 16, up to 64 (a draft batch)."""
    return max(16, min(64, triton.next_power_of_2(M)))


def block_k(K: int, largest: int = BLOCK_K) -> int:
    """Input channels an iteration: the largest power-of-two multiple of GROUP up to ``largest`` that divides K."""
    bk = GROUP
    while bk * 2 <= largest and K % (bk * 2) == 0:
        bk *= 2
    return bk


def w4a16_linear(x: torch.Tensor, w: TritonWeight, bias=None, out=None, block_k_max: int = BLOCK_K,
                 num_stages: int = 3, num_warps: int = 4) -> torch.Tensor:
    """x [..., K] (fp16 / bf16) -> [..., N] in x's dtype, with w from ``prepare``."""
    N, K = w.n, w.k
    if x.shape[-1] != K or x.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"x must be [..., {K}] fp16 / bf16, got {tuple(x.shape)} {x.dtype}")
    if w.tiles.shape != (triton.cdiv(N, w.block_n), K // PACK, w.block_n) or not w.tiles.is_contiguous():
        raise ValueError(f"tiles must be a contiguous [{triton.cdiv(N, w.block_n)}, {K // PACK}, {w.block_n}] "
                         f"(prepare's layout), got {tuple(w.tiles.shape)}")
    if bias is not None and bias.shape != (N,):
        raise ValueError(f"bias must be [{N}], got {tuple(bias.shape)}")
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
    grid = (w.tiles.shape[0], triton.cdiv(M, BM))
    _w4a16_kernel[grid](x2, w.tiles, w.scales, bias if bias is not None else w.scales, o2, M, N, K,
                        x2.stride(0), w.tiles.stride(0), w.scales.stride(0), o2.stride(0),
                        HAS_BIAS=bias is not None, GROUP_K=GROUP, BLOCK_M=BM, BLOCK_N=w.block_n,
                        BLOCK_K=block_k(K, block_k_max), num_stages=num_stages, num_warps=num_warps)
    return out


assert ZERO == 8  # the kernel's "- 8.0" is ref.py's zero code
