"""Reference for window_meta: a DECODE / TARGET_VERIFY / draft forward's per-request metadata (pure torch).

The attention backend needs, once per forward (not per layer), where each new token goes in the hot ring, each
request's slot and first query position, and depending on the forward: the page table (verify, decode, dense
drafts), the page the window completes (verify, decode: it is quantized in the same forward) and the draft's hot
range (drafts). As separate torch ops that is ~16 launches per forward (~30 for a verify), in a draft pass that runs
γ times a round and is launch-bound on small models; ``sgl_spec/kernels/window_meta/triton.py`` does it in one.

Inputs: ``positions [B*nq]`` (any int dtype; row b's window is ``positions[b*nq:(b+1)*nq]``, its first entry the
request's first query position), ``req_pool_indices [B]`` (any int dtype, the ring slot), page size ``P``, ring pages
``R``; optional ``req_to_token [S, L] int32`` (then ``page_table [B, MAXP]``, ``MAXP = ceil(L / P)``:
``req_to_token[slot, j*P] // P``), ``completions`` (needs ``req_to_token``: the window's completed page, below) and
``window_start [B]`` (drafts: the round's first position). Outputs (``WindowMeta``; fields that were not asked for
are None):

* ``w_row [B*nq] int64``: ``(slot*R + (pos // P) % R) * P + pos % P``, the flat ring row of each new token;
* ``slots [B] int32``, ``q_start [B] int32`` (= positions of each window's first row);
* ``q_rows [B] int64`` / ``q_pages [B] int32`` (``completions``): with ``j = q_start // P``, the ring row of page j's
  first token ``(slot*R + j % R) * P`` and, when the window completes page j (``(j+1)*P <= q_start + nq``; nq <= P,
  so it completes at most that page), its physical id ``page_table[b, min(j, MAXP-1)]``, else 0 (SGLang's padding
  page, never read: the quantize of a page that does not complete goes there instead of branching on the host);
* ``hot_start`` / ``hot_len`` / ``dense_pages [B] int32`` (``window_start``): ``hot_start = (window_start // P) * P``,
  ``hot_len = q_start - hot_start + 1``, ``dense_pages = window_start // P``.

Positions and window starts are non-negative, so floor and truncating division agree.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch


class WindowMeta(NamedTuple):
    w_row: torch.Tensor
    slots: torch.Tensor
    q_start: torch.Tensor
    page_table: Optional[torch.Tensor] = None
    q_rows: Optional[torch.Tensor] = None
    q_pages: Optional[torch.Tensor] = None
    hot_start: Optional[torch.Tensor] = None
    hot_len: Optional[torch.Tensor] = None
    dense_pages: Optional[torch.Tensor] = None


def ring_rows(slot: torch.Tensor, pos: torch.Tensor, P: int, R: int) -> torch.Tensor:
    """Flat hot-ring row of each token, ``hot[slot, (pos // P) % R, pos % P]`` as a row of ``hot.view(-1, H, D)``
    (int64; ``slot`` and ``pos`` broadcast). The one torch form of the ring's layout (docs/CONTRACTS.md, "Hot ring"):
    this reference, the prefill metadata and draft_decode's reference use it."""
    return (slot.long() * R + torch.remainder(torch.div(pos.long(), P, rounding_mode="floor"), R)) * P \
        + torch.remainder(pos.long(), P)


def check(positions, req_pool_indices, P, R, req_to_token, completions, window_start):
    B = req_pool_indices.shape[0]
    if req_pool_indices.dim() != 1 or positions.dim() != 1:
        raise ValueError(f"window_meta: positions and req_pool_indices must be 1-D, got {tuple(positions.shape)} "
                         f"and {tuple(req_pool_indices.shape)}")
    if B and positions.shape[0] % B:
        raise ValueError(f"window_meta: {positions.shape[0]} positions do not split into {B} equal windows")
    for name, t in (("positions", positions), ("req_pool_indices", req_pool_indices), ("window_start", window_start)):
        if t is not None and (t.dtype.is_floating_point or t.dtype == torch.bool):
            raise ValueError(f"window_meta: {name} must be an integer tensor, got {t.dtype}")
    if window_start is not None and tuple(window_start.shape) != (B,):
        raise ValueError(f"window_meta: window_start must be [{B}], got {tuple(window_start.shape)}")
    if completions and req_to_token is None:
        raise ValueError("window_meta: completions need req_to_token (the completed page's physical id)")
    if req_to_token is not None and (req_to_token.dim() != 2 or req_to_token.dtype != torch.int32):
        raise ValueError(f"window_meta: req_to_token must be [S, L] int32, got {tuple(req_to_token.shape)} "
                         f"{req_to_token.dtype}")
    if P < 1 or R < 1:
        raise ValueError(f"window_meta: page size and ring pages must be >= 1, got {P}, {R}")
    return B, (positions.shape[0] // B if B else 0)


def window_meta(positions, req_pool_indices, P: int, R: int, req_to_token=None, completions: bool = False,
                window_start=None) -> WindowMeta:
    B, nq = check(positions, req_pool_indices, P, R, req_to_token, completions, window_start)
    pos = positions.long()
    slot = req_pool_indices.long()
    w_row = ring_rows(slot.repeat_interleave(nq), pos, P, R)
    q0 = pos.view(B, nq)[:, 0] if B else pos[:0]
    page_table = q_rows = q_pages = hot_start = hot_len = dense_pages = None
    if req_to_token is not None:
        page_table = torch.div(req_to_token[:, ::P][slot], P, rounding_mode="floor").to(torch.int32)
    if completions:
        j = torch.div(q0, P, rounding_mode="floor")
        completes = (j + 1) * P <= q0 + nq
        phys = page_table.gather(1, j.clamp(max=page_table.shape[1] - 1).view(B, 1)).view(B)
        q_rows = (slot * R + torch.remainder(j, R)) * P
        q_pages = torch.where(completes, phys, torch.zeros_like(phys)).to(torch.int32)
    if window_start is not None:
        first = torch.div(window_start.long(), P, rounding_mode="floor")
        hot_start = (first * P).to(torch.int32)
        hot_len = (q0 - first * P + 1).to(torch.int32)
        dense_pages = first.to(torch.int32)
    return WindowMeta(w_row, slot.to(torch.int32), q0.to(torch.int32), page_table, q_rows, q_pages, hot_start,
                      hot_len, dense_pages)
