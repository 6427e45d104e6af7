"""``w4a16_linear``, pure-torch twin and the weight format: 4-bit weights in groups of ``GROUP`` along K.

Format (GPTQ's symmetric ``uint4b8``, what SGLang's Marlin W4A16 GEMM takes after its repack): for a weight
``w [N, K]`` every group of ``GROUP`` consecutive input channels of an output row has one scale
``s = max|w| / 7.5`` (in w's dtype); its codes are ``q = clamp(round(w / s) + 8, 0, 15)``, so ``w ≈ (q - 8) · s``
with a rounding error of at most ``s / 2`` (codes 0 … 15 cover -8s … 7s; max|w| maps to ±7.5s and rounds to the
nearer end). Codes are stored as GPTQ packs them: ``qweight [K/8, N] int32``, eight 4-bit codes of consecutive K
rows per word, the lowest nibble first; ``scales [K/GROUP, N]``.
"""
from __future__ import annotations

import torch

GROUP = 128
PACK = 8  # 4-bit codes per int32 word
ZERO = 8  # code of a zero weight (uint4b8)


def quantize(w: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """w [N, K] (K a multiple of ``group``) -> (qweight [K/8, N] int32, scales [K/group, N] in w's dtype)."""
    N, K = w.shape
    if K % group or group % PACK:
        raise ValueError(f"K = {K} must be a multiple of the group size {group} (itself a multiple of {PACK})")
    g = w.float().reshape(N, K // group, group)
    s = (g.abs().amax(-1, keepdim=True) / 7.5).to(w.dtype)
    sf = s.float()
    q = torch.where(sf > 0, torch.round(g / torch.where(sf > 0, sf, 1.0)), 0.0) + ZERO
    q = q.clamp(0, 15).to(torch.int32).reshape(N, K).t().contiguous()  # [K, N]
    words = torch.zeros(K // PACK, N, dtype=torch.int32, device=w.device)
    for i in range(PACK):
        words |= q[i::PACK] << (4 * i)
    return words, s.reshape(N, K // group).t().contiguous()


def unpack(qweight: torch.Tensor) -> torch.Tensor:
    """qweight [K/8, N] int32 -> codes [K, N] int32 in 0 … 15."""
    K8, N = qweight.shape
    codes = torch.stack([(qweight >> (4 * i)) & 0xF for i in range(PACK)], dim=1)  # [K/8, 8, N]
    return codes.reshape(K8 * PACK, N)


def dequantize(qweight: torch.Tensor, scales: torch.Tensor, dtype=None) -> torch.Tensor:
    """(qweight, scales) -> w [N, K] in ``dtype`` (default the scales' dtype), computed in fp32."""
    codes = unpack(qweight).float()  # [K, N]
    K = codes.shape[0]
    group = K // scales.shape[0]
    w = (codes - ZERO) * scales.float().repeat_interleave(group, dim=0)
    return w.t().to(dtype or scales.dtype)


def w4a16_linear(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, bias=None, out=None):
    """x [..., K] -> x @ w.T (+ bias) [..., N] with w the dequantized weight, in x's dtype (fp32 accumulation)."""
    w = dequantize(qweight, scales, torch.float32)
    y = x.reshape(-1, x.shape[-1]).float() @ w.t()
    if bias is not None:
        y = y + bias.float()
    y = y.to(x.dtype).reshape(*x.shape[:-1], w.shape[0])
    if out is None:
        return y
    return out.copy_(y)
