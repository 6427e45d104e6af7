"""argmax_rows (Triton): one program per row, the first index of the row's largest value (sgl_spec/kernels/argmax_rows/ref.py
has the semantics and why it exists). Written straight into ``out``, which may be a strided column (e.g.
``drafts[:, i]``), so the draft loop needs no copy launch after it.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.argmax_rows.ref import check

MAX_BLOCK = 8192  # one pass for pycode-30m's 8192-token vocabulary; larger vocabularies loop


@triton.jit
def _argmax_rows_kernel(x_ptr, s_xb, out_ptr, s_ob, V, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    row = x_ptr + b.to(tl.int64) * s_xb
    offs = tl.arange(0, BLOCK)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    # lane j starts at index j: a row of -inf everywhere then yields 0, as torch does
    at = offs.to(tl.int64)
    for v0 in range(0, V, BLOCK):
        o = v0 + offs
        x = tl.load(row + o, mask=o < V, other=float("-inf")).to(tl.float32)
        x = tl.where(x != x, float("inf"), x)  # NaN ranks as +inf (argmax_rows_ref)
        take = x > best  # strict: an earlier chunk keeps its ties
        best = tl.where(take, x, best)
        at = tl.where(take, o.to(tl.int64), at)
    m = tl.max(best, 0)
    idx = tl.min(tl.where(best == m, at, V), 0)  # the first index among the lanes that hold the max
    tl.store(out_ptr + b.to(tl.int64) * s_ob, idx)


def argmax_rows(x: torch.Tensor, out=None) -> torch.Tensor:
    check(x, out)
    B, V = x.shape
    if out is None:
        out = torch.empty(B, dtype=torch.int64, device=x.device)
    if B == 0:
        return out
    block = min(MAX_BLOCK, triton.next_power_of_2(V))
    _argmax_rows_kernel[(B,)](x_ptr=x, s_xb=x.stride(0), out_ptr=out, s_ob=out.stride(0), V=V, BLOCK=block,
                              num_warps=8 if block >= 4096 else 4)
    return out
