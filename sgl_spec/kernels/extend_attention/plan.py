"""``ExtendPlan``: the batch layout ``extend_attention`` launches over, built once per EXTEND forward on the host
(the prompt lengths are host ints there) and shared by every layer."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ExtendPlan:
    starts: torch.Tensor  # [B] int32: first new position of each request (its prefix length)
    row0: torch.Tensor  # [B] int32: row of that position in q / k / v / out
    blocks: torch.Tensor  # [n, 3] int32: (request, first position, end position) of each program's token block
    block_t: int  # tokens a block holds at most; divides the page size, blocks never leave their page
    starts_host: tuple  # the same starts, lengths and rows as host ints (the reference twin loops over them)
    lens_host: tuple
    row0_host: tuple


def block_tokens(group: int, page_size: int, head_dim: int = 128) -> int:
    """New tokens a program owns: rows = tokens × the group rounded up to a power of two; 128 rows at head_dim 128,
    256 below (each dequantized key tile serves more rows; on an H200 at Llama-3-8B heads 128 rows ran 1.6× faster
    than 64), at least 16 tokens (the dot's minimum), never more than a page."""
    gp = 1 << max(0, group - 1).bit_length()
    rows = 128 if head_dim >= 128 else 256
    return max(16, min(page_size, rows // gp))


def ranges(first: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Concatenated ``first[i] … first[i] + count[i] - 1`` over i (int64, host)."""
    total = int(count.sum())
    if total == 0:
        return torch.zeros(0, dtype=torch.long)
    ends = torch.cumsum(count, 0)
    return torch.repeat_interleave(first - (ends - count), count, output_size=total) + torch.arange(total)


def spans(first: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(i, v) for every ``v`` in ``first[i] … first[i] + count[i] - 1``, over i in order (int64, host)."""
    return torch.repeat_interleave(torch.arange(count.numel()), count), ranges(first, count)


def extend_plan(starts, lens, group: int, page_size: int, device, head_dim: int = 128) -> ExtendPlan:
    """Blocks of every request's new positions ``start … start+len-1``, cut at multiples of ``block_tokens`` (so at
    page boundaries too)."""
    block_t = block_tokens(group, page_size, head_dim)
    s = torch.tensor(list(starts), dtype=torch.long)
    n = torch.tensor(list(lens), dtype=torch.long)
    e = s + n
    row0 = torch.cumsum(n, 0) - n
    count = torch.where(n > 0, (e - 1) // block_t - s // block_t + 1, 0)
    blk_b, blk_j = spans(s // block_t, count)
    first, end = torch.maximum(s[blk_b], blk_j * block_t), torch.minimum(e[blk_b], (blk_j + 1) * block_t)
    blocks = torch.stack([blk_b, first, end], 1)
    tensor = torch.stack([s, row0]).to(torch.int32).to(device, non_blocking=True)
    blk = blocks.to(torch.int32).reshape(-1, 3).to(device, non_blocking=True)
    return ExtendPlan(tensor[0], tensor[1], blk, block_t, tuple(starts), tuple(lens), tuple(row0.tolist()))


@dataclass(frozen=True)
class PagedPlan:
    """The FA3 engine's layout (fa3.py). A query at position t of page j = t // P reads the INT8 view of pages
    0 … j-1 and its own page in full precision up to t. That view is split in two causal attentions:

    * part A, one segment per request: the INT8 keys at least one page behind the query (positions ≤ t - P), from
      the transient fp16 copy of the request's pages as FA3's paged cache (``a_table``, ``a_len``: causal aligned
      to the bottom right, so the request's row for position t sees exactly its first t - P + 1 keys);
    * part B, one segment per (request, page its new tokens touch): the keys of the last two pages, [INT8 view of
      page j-1 ; own page in full precision], causal with a window of P keys (a query at page offset r sees page
      j-1's offsets r+1 … P-1 and its own offsets 0 … r), gathered into one buffer: ``b_own_pos`` ← rows
      ``b_own_src`` of [k (T rows) ; prev_k (B*P rows)], ``b_int8_pos`` ← rows ``b_int8_src`` of the copy.

    A and B never share a key and together are the view; their results merge by log-sum-exp."""
    cu_q: torch.Tensor  # [B+1] int32: first row of each request
    a_len: torch.Tensor  # [B] int32: part A keys of each request (its last position - P + 1, at least 0)
    a_table: torch.Tensor  # [B, max(1, most pages)] int32: the copy's page of each of the request's INT8 pages
    dq_pages: torch.Tensor  # [N8] int64: physical page of each page of the copy (requests one after another)
    b_cu_q: torch.Tensor  # [S+1] int32: first row of each part B segment
    b_cu_k: torch.Tensor  # [S+1] int32: first key of each part B segment in the gathered buffer
    b_own_pos: torch.Tensor  # [K_own] int64
    b_own_src: torch.Tensor  # [K_own] int64
    b_int8_pos: torch.Tensor  # [K_int8] int64
    b_int8_src: torch.Tensor  # [K_int8] int64: rows of the copy viewed as [N8 * P, Hkv, D]
    max_q: int  # rows of the longest request
    b_max_q: int  # rows of the longest part B segment (≤ P)
    b_max_k: int  # keys of the longest part B segment (≤ 2P)
    n8: int  # pages of the copy
    b_keys: int  # keys of the gathered part B buffer


@dataclass(frozen=True)
class _Pages:
    """What both FA3 layouts derive from the batch (host tensors): per request its start ``s``, new tokens ``n``,
    end ``e``, first row ``row``, INT8 pages its last query reads ``need`` and their first page in the copy
    ``base``; per segment (request, page its new positions touch) ``seg_b``, ``seg_j``, positions ``t0 … t1-1``,
    of which ``n_ring`` own-page keys come from the ring and ``n_new`` are new rows; ``dq``: the copy's physical
    pages (device)."""
    s: torch.Tensor
    n: torch.Tensor
    e: torch.Tensor
    row: torch.Tensor
    need: torch.Tensor
    base: torch.Tensor
    n8: int
    dq: torch.Tensor
    seg_b: torch.Tensor
    seg_j: torch.Tensor
    t0: torch.Tensor
    t1: torch.Tensor
    n_ring: torch.Tensor
    n_new: torch.Tensor

    @property
    def B(self) -> int:
        return self.s.numel()

    @property
    def T(self) -> int:
        return int(self.n.sum())

    @property
    def S(self) -> int:
        return self.seg_b.numel()


def _pages(starts, lens, page_table: torch.Tensor, P: int) -> _Pages:
    dev = page_table.device
    s = torch.tensor(list(starts), dtype=torch.long)
    n = torch.tensor(list(lens), dtype=torch.long)
    e = s + n
    live = n > 0
    row = torch.cumsum(n, 0) - n  # first row of each request
    # the INT8 pages each request's last query reads, copied one request after another
    need = torch.where(live, (e - 1).clamp_min(0) // P, 0)
    base = torch.cumsum(need, 0) - need
    n8 = int(need.sum())
    dq_b, dq_j = spans(torch.zeros(s.numel(), dtype=torch.long), need)
    dq = page_table[dq_b.to(dev), dq_j.to(dev)].long() if n8 else torch.zeros(0, dtype=torch.long, device=dev)
    # one segment per (request, page its new positions touch)
    seg_b, seg_j = spans(s // P, torch.where(live, (e - 1) // P - s // P + 1, 0))
    t0 = torch.maximum(s[seg_b], seg_j * P)
    t1 = torch.minimum(e[seg_b], (seg_j + 1) * P)
    return _Pages(s, n, e, row, need, base, n8, dq, seg_b, seg_j, t0, t1, t0 - seg_j * P, t1 - t0)


def _to(dev):
    return lambda x: x.to(dev, non_blocking=True)


def paged_plan(starts, lens, page_table: torch.Tensor, page_size: int) -> PagedPlan:
    """The layout of every request's new positions ``start … start+len-1``; ``page_table`` [B, ≥ pages] (device)
    maps logical to physical pages. Built with a few host tensor ops whatever the number of pages (a 16k-token
    chunk has 256 part B segments), then moved to the device without waiting."""
    P, dev = page_size, page_table.device
    g = _pages(starts, lens, page_table, P)
    B, T, S = g.B, g.T, g.S
    # part A: each request's INT8 pages as FA3's paged cache
    width = max(1, int(g.need.max()) if B else 1)
    col = torch.arange(width)
    table = torch.where(col[None] < g.need[:, None], g.base[:, None] + col[None], 0).to(torch.int32)
    # part B: keys [INT8 page j-1 ; ring ; new rows] of every segment
    n_i8 = torch.where(g.seg_j > 0, P, 0)
    seg_keys = n_i8 + g.n_ring + g.n_new
    cu_k = torch.cumsum(seg_keys, 0) - seg_keys
    i8_pos = ranges(cu_k, n_i8)
    i8_src = ranges((g.base[g.seg_b] + g.seg_j - 1) * P, n_i8)
    own_pos = torch.cat([ranges(cu_k + n_i8, g.n_ring), ranges(cu_k + n_i8 + g.n_ring, g.n_new)])
    own_src = torch.cat([ranges(T + g.seg_b * P, g.n_ring), ranges(g.row[g.seg_b] + g.t0 - g.s[g.seg_b], g.n_new)])
    zero = torch.zeros(1, dtype=torch.long)
    b_cu_q = torch.cat([zero, torch.cumsum(g.n_new, 0)])
    b_cu_k = torch.cat([zero, torch.cumsum(seg_keys, 0)])
    to = _to(dev)
    i32 = lambda x: to(x.to(torch.int32))  # noqa: E731
    return PagedPlan(
        cu_q=i32(torch.cat([zero, torch.cumsum(g.n, 0)])),
        a_len=i32(torch.where(g.n > 0, (g.e - P).clamp_min(0), 0)), a_table=to(table), dq_pages=g.dq,
        b_cu_q=i32(b_cu_q), b_cu_k=i32(b_cu_k), b_own_pos=to(own_pos), b_own_src=to(own_src),
        b_int8_pos=to(i8_pos), b_int8_src=to(i8_src), max_q=int(g.n.max()) if B else 0,
        b_max_q=int(g.n_new.max()) if S else 0, b_max_k=int(seg_keys.max()) if S else 0, n8=g.n8,
        b_keys=int(seg_keys.sum()))


@dataclass(frozen=True)
class SegmentPlan:
    """The one-call FA3 layout (fa3_segments.py). One segment per (request, page its new tokens touch): page j's
    queries read a paged cache row of j + 1 pages, the INT8 view of pages 0 … j-1 (the transient fp16 copy, pages of
    a request one after another, as in ``PagedPlan``) then page j in full precision (an own page of the copy after
    its ``n8`` INT8 pages: the ring part before the request's start, then the new rows), causal aligned to the bottom
    right: a query at page offset r sees j·P INT8 keys and own offsets 0 … r. That is the view in one FA3 call."""
    cu_q: torch.Tensor  # [S+1] int32: first row of each segment (rows in q order)
    seqlens: torch.Tensor  # [S] int32: keys of each segment (j·P + its own page's keys up to its last row)
    table: torch.Tensor  # [S, max(1, widest j + 1)] int32: pages of the copy each segment reads
    dq_pages: torch.Tensor  # [N8] int64: physical page of each INT8 page of the copy
    own_pos: torch.Tensor  # [K_own] int64: slots of the copy viewed as [(N8 + S) * P, Hkv, D] …
    own_src: torch.Tensor  # [K_own] int64: … filled from rows of [k (T rows) ; prev_k (B*P rows)]
    max_q: int  # rows of the longest segment (≤ P)
    n8: int  # INT8 pages of the copy
    segments: int  # S


def segment_plan(starts, lens, page_table: torch.Tensor, page_size: int) -> SegmentPlan:
    """The one-call layout of every request's new positions ``start … start+len-1`` (``page_table`` [B, ≥ pages],
    device, logical to physical pages); a few host tensor ops, then moved to the device without waiting."""
    P, dev = page_size, page_table.device
    g = _pages(starts, lens, page_table, P)
    T, S = g.T, g.S
    width = max(1, int(g.seg_j.max()) + 1 if S else 1)
    col = torch.arange(width)[None]
    own_page = g.n8 + torch.arange(S)
    j = g.seg_j[:, None]
    table = torch.where(col < j, g.base[g.seg_b][:, None] + col,
                        torch.where(col == j, own_page[:, None], 0)).to(torch.int32)
    own_pos = torch.cat([ranges(own_page * P, g.n_ring), ranges(own_page * P + g.n_ring, g.n_new)])
    own_src = torch.cat([ranges(T + g.seg_b * P, g.n_ring), ranges(g.row[g.seg_b] + g.t0 - g.s[g.seg_b], g.n_new)])
    zero = torch.zeros(1, dtype=torch.long)
    to = _to(dev)
    return SegmentPlan(
        cu_q=to(torch.cat([zero, torch.cumsum(g.n_new, 0)]).to(torch.int32)), seqlens=to(g.t1.to(torch.int32)),
        table=to(table), dq_pages=g.dq, own_pos=to(own_pos), own_src=to(own_src),
        max_q=int(g.n_new.max()) if S else 0, n8=g.n8, segments=S)
