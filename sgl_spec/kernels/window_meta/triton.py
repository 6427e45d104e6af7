"""window_meta: a DECODE / TARGET_VERIFY / draft forward's per-request metadata in one launch (Triton).

Semantics, inputs and outputs: sgl_spec/kernels/window_meta/ref.py. One program per request writes its window's ring rows,
its slot and first position, and (as asked) its page-table row, the page its window completes and its draft hot
range, in place of ~16 torch launches per draft pass and ~30 per verify.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.window_meta.ref import WindowMeta, check

BLOCK_T = 256  # page-table columns a program writes per step


@triton.jit
def _window_meta_kernel(POS, RPI, RTT, WS, W_ROW, SLOTS, Q_START, TABLE, Q_ROWS, Q_PAGES, HOT_START, HOT_LEN, DENSE,
                        s_rtt, MAXP, NQ: tl.constexpr, BLOCK_Q: tl.constexpr, P: tl.constexpr, R: tl.constexpr,
                        HAS_TABLE: tl.constexpr, COMPLETIONS: tl.constexpr, HAS_WS: tl.constexpr,
                        BLOCK_T: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    slot = tl.load(RPI + b).to(tl.int64)
    i = tl.arange(0, BLOCK_Q)
    ok = i < NQ
    pos = tl.load(POS + b * NQ + i, mask=ok, other=0).to(tl.int64)
    tl.store(W_ROW + b * NQ + i, (slot * R + (pos // P) % R) * P + pos % P, mask=ok)
    q0 = tl.load(POS + b * NQ).to(tl.int64)
    tl.store(SLOTS + b, slot.to(tl.int32))
    tl.store(Q_START + b, q0.to(tl.int32))
    row = RTT + slot * s_rtt
    if HAS_TABLE:
        for j0 in range(0, MAXP, BLOCK_T):
            j = j0 + tl.arange(0, BLOCK_T)
            m = j < MAXP
            v = tl.load(row + j.to(tl.int64) * P, mask=m, other=0)
            tl.store(TABLE + b * MAXP + j, v // P, mask=m)
    if COMPLETIONS:
        j = q0 // P
        phys = tl.load(row + tl.minimum(j, MAXP - 1) * P) // P
        tl.store(Q_ROWS + b, (slot * R + j % R) * P)
        tl.store(Q_PAGES + b, tl.where((j + 1) * P <= q0 + NQ, phys, 0).to(tl.int32))
    if HAS_WS:
        first = tl.load(WS + b).to(tl.int64) // P
        tl.store(HOT_START + b, (first * P).to(tl.int32))
        tl.store(HOT_LEN + b, (q0 - first * P + 1).to(tl.int32))
        tl.store(DENSE + b, first.to(tl.int32))


def window_meta(positions, req_pool_indices, P: int, R: int, req_to_token=None, completions: bool = False,
                window_start=None) -> WindowMeta:
    B, nq = check(positions, req_pool_indices, P, R, req_to_token, completions, window_start)
    dev = positions.device
    for name, t in (("req_pool_indices", req_pool_indices), ("req_to_token", req_to_token),
                    ("window_start", window_start)):
        if t is not None and t.device != dev:
            raise ValueError(f"window_meta: {name} is on {t.device}, positions on {dev}")
    if not positions.is_contiguous() or not req_pool_indices.is_contiguous():
        raise ValueError("window_meta: positions and req_pool_indices must be contiguous")
    if req_to_token is not None and req_to_token.stride(1) != 1:
        raise ValueError("window_meta: req_to_token needs contiguous rows")
    i32 = dict(dtype=torch.int32, device=dev)
    w_row = torch.empty((B * nq,), dtype=torch.int64, device=dev)
    slots, q_start = torch.empty((B,), **i32), torch.empty((B,), **i32)
    maxp = triton.cdiv(req_to_token.shape[1], P) if req_to_token is not None else 1
    table = torch.empty((B, maxp), **i32) if req_to_token is not None else None
    q_rows = torch.empty((B,), dtype=torch.int64, device=dev) if completions else None
    q_pages = torch.empty((B,), **i32) if completions else None
    hs, hl, dp = ((torch.empty((B,), **i32) for _ in range(3)) if window_start is not None else (None,) * 3)
    if B:
        unused = w_row  # pointer arguments a constexpr flag turns off are never dereferenced
        _window_meta_kernel[(B,)](
            POS=positions, RPI=req_pool_indices, RTT=unused if req_to_token is None else req_to_token,
            WS=unused if window_start is None else window_start.contiguous(), W_ROW=w_row, SLOTS=slots,
            Q_START=q_start, TABLE=unused if table is None else table, Q_ROWS=unused if q_rows is None else q_rows,
            Q_PAGES=unused if q_pages is None else q_pages, HOT_START=unused if hs is None else hs,
            HOT_LEN=unused if hl is None else hl, DENSE=unused if dp is None else dp,
            s_rtt=0 if req_to_token is None else req_to_token.stride(0), MAXP=maxp,
            NQ=nq, BLOCK_Q=triton.next_power_of_2(max(nq, 1)), P=P, R=R, HAS_TABLE=req_to_token is not None,
            COMPLETIONS=bool(completions), HAS_WS=window_start is not None, BLOCK_T=BLOCK_T, num_warps=1,
        )
    return WindowMeta(w_row, slots, q_start, table, q_rows, q_pages, hs, hl, dp)
