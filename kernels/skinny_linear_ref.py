"""Pure-torch reference of ``skinny_linear`` and the argument checks both share.

``x @ weight.T + bias`` with fp32 accumulation and one rounding to x's dtype (what the Triton kernel computes, up to
the summation order)."""
from __future__ import annotations

import torch

_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def check(x, weight, bias, out, max_m):
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"skinny_linear: x {tuple(x.shape)} does not match weight {tuple(weight.shape)} ([N, K])")
    if x.dtype not in _DTYPES or weight.dtype != x.dtype:
        raise ValueError(f"skinny_linear: x and weight need one dtype of {_DTYPES}, got {x.dtype} / {weight.dtype}")
    if x.device != weight.device:
        raise ValueError(f"skinny_linear: x is on {x.device}, weight on {weight.device}")
    if weight.stride(1) != 1 or (x.shape[-1] > 1 and x.stride(-1) != 1):
        raise ValueError("skinny_linear: x and weight need a contiguous last dim")
    rows = x.numel() // max(1, x.shape[-1])
    if rows > max_m:
        raise ValueError(f"skinny_linear: {rows} rows, at most {max_m} (use F.linear)")
    if x.dim() > 2 and not x.is_contiguous():
        raise ValueError("skinny_linear: x with more than 2 dims must be contiguous")
    if bias is not None and (bias.shape != (weight.shape[0],) or bias.device != x.device):
        raise ValueError(f"skinny_linear: bias must be [{weight.shape[0]}] on {x.device}")
    if out is not None and (tuple(out.shape) != (*x.shape[:-1], weight.shape[0]) or out.dtype != x.dtype
                            or not out.is_contiguous()):
        raise ValueError(f"skinny_linear: out must be a contiguous {x.dtype} tensor of shape "
                         f"{(*x.shape[:-1], weight.shape[0])}")


def skinny_linear(x, weight, bias=None, out=None, **_):
    check(x, weight, bias, out, 1 << 62)
    y = x.float() @ weight.float().T
    if bias is not None:
        y = y + bias.float()
    y = y.to(x.dtype)
    if out is None:
        return y
    out.copy_(y)
    return out
