"""Pure-torch reference of ``add_rmsnorm_linear`` and the argument checks both share.

SGLang's RMSNorm (``forward_native``: fp32 sum, residual rounded to the model dtype, variance from the fp32 sum,
``(x * rrms * weight)`` rounded to the model dtype) followed by ``x @ weight.T + bias`` with fp32 accumulation:

    r = x + residual            (fp32; residual_out = r in x's dtype; no residual: r = x)
    h = (r * rsqrt(mean(r^2) + eps) * norm_weight).to(x.dtype)
    y = (h @ weight.T + bias).to(x.dtype)
"""
from __future__ import annotations

import torch

from sgl_spec.kernels.skinny_linear_ref import check as check_linear


def check(x, residual, norm_weight, weight, bias, out, residual_out, max_m):
    check_linear(x, weight, bias, out, max_m)
    if x.dim() != 2 or not x.is_contiguous():
        raise ValueError(f"add_rmsnorm_linear: x must be a contiguous [M, K] tensor, got {tuple(x.shape)}")
    K = x.shape[1]
    if norm_weight.shape != (K,) or norm_weight.device != x.device or not norm_weight.is_contiguous():
        raise ValueError(f"add_rmsnorm_linear: norm_weight must be a contiguous [{K}] tensor on {x.device}")
    if residual is not None:
        if residual.shape != x.shape or residual.dtype != x.dtype or not residual.is_contiguous():
            raise ValueError("add_rmsnorm_linear: residual must be a contiguous tensor like x")
    if residual_out is not None:
        if residual is None:
            raise ValueError("add_rmsnorm_linear: residual_out needs a residual (without one the residual is x)")
        if residual_out.shape != x.shape or residual_out.dtype != x.dtype or not residual_out.is_contiguous():
            raise ValueError("add_rmsnorm_linear: residual_out must be a contiguous tensor like x")
        # other programs still read x and residual while the first column of programs writes residual_out
        if residual_out.data_ptr() in (x.data_ptr(), residual.data_ptr()):
            raise ValueError("add_rmsnorm_linear: residual_out must not alias x or residual")


def add_rmsnorm_linear(x, residual, norm_weight, eps, weight, bias=None, out=None, residual_out=None, **_):
    check(x, residual, norm_weight, weight, bias, out, residual_out, 1 << 62)
    r = x.float() if residual is None else x.float() + residual.float()
    h = (r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * norm_weight.float()).to(x.dtype)
    y = h.float() @ weight.float().T
    if bias is not None:
        y = y + bias.float()
    y = y.to(x.dtype)
    if out is not None:
        out.copy_(y)
        y = out
    if residual is None:
        return y, x
    res = r.to(x.dtype)
    if residual_out is not None:
        residual_out.copy_(res)
        res = residual_out
    return y, res
