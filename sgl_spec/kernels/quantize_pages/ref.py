"""Pure-torch reference of ``quantize_pages`` and of the two dequantized views (see sgl_spec/kvcache/format.py).

All arithmetic is fp32 in the same order as the Triton kernel, so codes agree except where (x - z)/s lands within
float rounding of a .5 boundary.
"""
from __future__ import annotations

import torch

from sgl_spec.kvcache.format import fp16_round_down, fp16_round_up, pack_nibbles, unpack_nibbles


def quantize_groups_ref(x: torch.Tensor, dim: int):
    """Quantize ``x`` (any float dtype) with one (scale, zero) per slice along ``dim``.

    Returns (upper codes uint8, lower codes uint8 (l + 8), scale fp16, zero fp16); codes have x's shape, scale/zero
    have ``dim`` reduced away.
    """
    xf = x.float()
    mn = xf.amin(dim=dim)
    mx = xf.amax(dim=dim)
    zero = fp16_round_down(mn)
    # tensor / tensor: PyTorch's CUDA division by a Python scalar multiplies by its reciprocal (one more rounding),
    # so `/ 15.0` gave scales one fp16 ulp off from the CPU (and Triton div_rn) result for some channels on GPU.
    scale = fp16_round_up((mx - zero.float()) / torch.full_like(mx, 15.0)).clamp_min(0)
    z = zero.float().unsqueeze(dim)
    s = scale.float().unsqueeze(dim)
    inv = torch.where(s > 0, 1.0 / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(s))
    q = (xf - z) * inv  # in [0, 15] up to rounding
    u = torch.clamp(torch.floor(q + 0.5), 0, 15)
    r16 = (q - u) * 16.0  # residual in units of s/16, in [-8, 8]
    l = torch.clamp(torch.floor(r16), -8, 7)
    return u.to(torch.uint8), (l + 8).to(torch.uint8), scale, zero


def quantize_pages_ref(k: torch.Tensor, v: torch.Tensor):
    """k, v: [num_pages, H, P, D] (bf16/fp16/fp32) -> dict of the 8 page tensors (layout in kvformat)."""
    assert k.shape == v.shape and k.dim() == 4
    ku, kl, ks, kz = quantize_groups_ref(k, dim=2)  # keys: per channel over the page's tokens
    vu, vl, vs, vz = quantize_groups_ref(v, dim=3)  # values: per token over head_dim
    return dict(
        k_upper=pack_nibbles(ku), k_lower=pack_nibbles(kl), k_scale=ks, k_zero=kz,
        v_upper=pack_nibbles(vu), v_lower=pack_nibbles(vl), v_scale=vs, v_zero=vz,
    )


def dequant_keys_ref(upper, lower, scale, zero, draft: bool) -> torch.Tensor:
    """upper/lower [..., P, D/2] packed, scale/zero [..., D] -> fp32 [..., P, D]."""
    s = scale.float().unsqueeze(-2)
    z = zero.float().unsqueeze(-2)
    return _dequant(upper, lower, s, z, draft)


def dequant_values_ref(upper, lower, scale, zero, draft: bool) -> torch.Tensor:
    """upper/lower [..., P, D/2] packed, scale/zero [..., P] -> fp32 [..., P, D]."""
    s = scale.float().unsqueeze(-1)
    z = zero.float().unsqueeze(-1)
    return _dequant(upper, lower, s, z, draft)


def _dequant(upper, lower, s, z, draft: bool) -> torch.Tensor:
    u = unpack_nibbles(upper).float()
    if draft:
        return z + s * u
    c = u * 16.0 + unpack_nibbles(lower).float()
    return z + (s * 0.0625) * (c - 7.5)


def quantize_pages(src_k, src_v, src_row, page_ids, store, *, launch=None):  # launch: the Triton engine's (unused)
    """CPU twin of the Triton ``quantize_pages`` (contract in docs/CONTRACTS.md): gather the P rows
    ``src_row[i] … src_row[i]+P-1`` of ``src_k``/``src_v`` [T, H, D], quantize them and write page ``page_ids[i]`` of
    ``store`` (a PageStore) in place. Returns ``store``."""
    P = store.k_upper.shape[2]
    if src_row.numel() == 0:
        return store
    rows = src_row.long().view(-1, 1) + torch.arange(P, device=src_row.device)  # [n, P]
    k = src_k[rows].permute(0, 2, 1, 3)  # [n, P, H, D] -> [n, H, P, D]
    v = src_v[rows].permute(0, 2, 1, 3)
    pages = quantize_pages_ref(k, v)
    ids = page_ids.long()
    for name, t in pages.items():
        getattr(store, name)[ids] = t
    return store
