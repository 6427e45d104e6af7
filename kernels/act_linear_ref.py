"""Pure-torch reference of ``silu_mul_linear`` and its argument checks.

SGLang's SiluAndMul (``silu(g) * u`` in fp32, rounded to the model dtype; g, u = the two halves of the gate_up
output) followed by ``a @ weight.T + bias`` with fp32 accumulation."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from sgl_spec.kernels.skinny_linear_ref import check as check_linear


def check(gu, weight, bias, out, max_m):
    if gu.dim() != 2 or gu.shape[1] % 2 or not gu.is_contiguous():
        raise ValueError(f"silu_mul_linear: gu must be a contiguous [M, 2I] tensor, got {tuple(gu.shape)}")
    check_linear(gu[:, : gu.shape[1] // 2], weight, bias, out, max_m)


def silu_mul_linear(gu, weight, bias=None, out=None, **_):
    check(gu, weight, bias, out, 1 << 62)
    i = gu.shape[1] // 2
    a = (F.silu(gu[:, :i].float()) * gu[:, i:].float()).to(gu.dtype)
    y = a.float() @ weight.float().T
    if bias is not None:
        y = y + bias.float()
    y = y.to(gu.dtype)
    if out is None:
        return y
    out.copy_(y)
    return out
