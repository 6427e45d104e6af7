"""Pure-torch twin of ``norm_pair_linear`` and the argument checks both share.

A decoder layer's ``add-RMSNorm -> linear -> epilogue`` with the norm weight folded into the linear weight
(``weight = W diag(g)``, sgl_spec/speculative/draft_layers.py ``prescaled``), so the kernel feeds x and the residual into its dots as
loaded and applies the row scale after them:

    h    = x + residual                               (fp32; residual_out = h in x's dtype; no residual: h = x)
    y    = rsqrt(mean(h^2) + eps) * (h @ weight.T)    (fp32)
    rope:     y viewed as [M, N / D, D]; heads [0, rot_heads) rotated NeoX-style by cos_sin[positions]
              (row = cos | sin, D / 2 each): (a, b) -> (a cos - b sin, b cos + a sin) on the two halves of a head
    silu_mul: out = silu(y[:, :N/2]) * y[:, N/2:]
    out  = epilogue(y).to(x.dtype)

Against SGLang's layers (norm rounded to the model dtype, then the GEMM, then rope / SiluAndMul on rounded values) the
difference is rounding only: W diag(g) rounded once, the normalized input and the GEMM output not rounded.
"""
from __future__ import annotations

import torch

EPILOGUES = ("rope", "silu_mul")
_FLOATS = (torch.bfloat16, torch.float16, torch.float32)


def _fail(msg):
    raise ValueError(f"norm_pair_linear: {msg}")


def check(x, residual, weight, epilogue, out, residual_out, positions, cos_sin, head_dim, rot_heads):
    """Validate the arguments; returns the output's shape."""
    if epilogue not in EPILOGUES:
        _fail(f"epilogue must be one of {EPILOGUES}, got {epilogue!r}")
    if x.dim() != 2 or not x.is_contiguous() or x.dtype not in _FLOATS:
        _fail(f"x must be a contiguous [M, K] float tensor, got {tuple(x.shape)} {x.dtype}")
    M, K = x.shape
    if weight.dim() != 2 or weight.shape[1] != K or weight.stride(1) != 1 or weight.dtype != x.dtype \
            or weight.device != x.device:
        _fail(f"weight must be [N, {K}] with unit last stride, dtype {x.dtype}, on {x.device}; got "
              f"{tuple(weight.shape)} {weight.dtype}")
    N = weight.shape[0]
    for name, t in (("residual", residual), ("residual_out", residual_out)):
        if t is not None and (t.shape != x.shape or t.dtype != x.dtype or not t.is_contiguous() or t.device != x.device):
            _fail(f"{name} must be a contiguous tensor like x")
    if residual_out is not None:
        if residual is None:
            _fail("residual_out needs a residual (without one the residual is x)")
        # the other programs still read x and residual while the residual program writes residual_out
        if residual_out.data_ptr() in (x.data_ptr(), residual.data_ptr()):
            _fail("residual_out must not alias x or residual")
    if epilogue == "rope":
        if not head_dim or head_dim % 16 or N % head_dim:
            _fail(f"rope needs a head_dim that is a multiple of 16 and divides N={N}, got {head_dim}")
        if not 0 <= rot_heads <= N // head_dim:
            _fail(f"rot_heads must be in [0, {N // head_dim}], got {rot_heads}")
        if positions is None or positions.shape != (M,) or positions.dtype not in (torch.int32, torch.int64) \
                or positions.device != x.device:
            _fail(f"rope needs int32/int64 positions of shape ({M},) on {x.device}")
        if cos_sin is None or cos_sin.dim() != 2 or cos_sin.shape[1] != head_dim or not cos_sin.is_contiguous() \
                or cos_sin.dtype not in _FLOATS or cos_sin.device != x.device:
            _fail(f"rope needs a contiguous float cos_sin [max_positions, {head_dim}] on {x.device}")
        shape = (M, N)
    else:
        if N % 2:
            _fail(f"silu_mul needs an even N (gate rows, then up rows), got {N}")
        shape = (M, N // 2)
    if out is not None and (tuple(out.shape) != shape or out.dtype != x.dtype or out.stride(-1) != 1
                            or out.device != x.device):
        _fail(f"out must be {shape} {x.dtype} with unit last stride")
    return shape


def norm_pair_linear(x, residual, weight, eps, epilogue, out=None, residual_out=None, positions=None, cos_sin=None,
                     head_dim=None, rot_heads=0, launch=None):  # launch: the Triton engine's (unused)
    """Returns ``(out, residual)``: the epilogue's output and the next residual (``x + residual``, or ``x`` itself
    when there is no residual)."""
    check(x, residual, weight, epilogue, out, residual_out, positions, cos_sin, head_dim, rot_heads)
    h = x.float() if residual is None else x.float() + residual.float()
    y = (h @ weight.float().T) * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    if epilogue == "rope":
        M, half = x.shape[0], head_dim // 2
        y = y.view(M, -1, head_dim).clone()
        cs = cos_sin[positions.long()].float()
        c, s = cs[:, None, :half], cs[:, None, half:]
        a, b = y[:, :rot_heads, :half].clone(), y[:, :rot_heads, half:].clone()
        y[:, :rot_heads, :half] = a * c - b * s
        y[:, :rot_heads, half:] = b * c + a * s
        y = y.reshape(M, -1)
    else:
        n = weight.shape[0] // 2
        y = torch.nn.functional.silu(y[:, :n]) * y[:, n:]
    y = y.to(x.dtype)
    if out is not None:
        out.copy_(y)
        y = out
    if residual is None:
        return y, x
    res = h.to(x.dtype)
    if residual_out is not None:
        residual_out.copy_(res)
        res = residual_out
    return y, res
