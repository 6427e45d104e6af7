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


def extend_plan(starts, lens, group: int, page_size: int, device, head_dim: int = 128) -> ExtendPlan:
    """Blocks of every request's new positions ``start … start+len-1``, cut at multiples of ``block_tokens`` (so at
    page boundaries too)."""
    block_t = block_tokens(group, page_size, head_dim)
    row0, blocks, r = [], [], 0
    for b, (s, n) in enumerate(zip(starts, lens)):
        row0.append(r)
        p = s
        while p < s + n:
            e = min(s + n, (p // block_t + 1) * block_t)
            blocks.append((b, p, e))
            p = e
        r += n
    tensor = torch.tensor([list(starts), row0], dtype=torch.int32).to(device, non_blocking=True)
    blk = torch.tensor(blocks, dtype=torch.int32).reshape(-1, 3).to(device, non_blocking=True)
    return ExtendPlan(tensor[0], tensor[1], blk, block_t, tuple(starts), tuple(lens), tuple(row0))


@dataclass(frozen=True)
class PagedPlan:
    """The FA3 engine's layout (fa3.py): the new tokens cut into segments that never leave their page, in row order.

    A segment's queries read (1) the INT8 view of the request's pages before the segment's page - rows of a
    transient fp16 copy of the pages, dequantized once per layer, listed per segment in ``prefix_table`` - and (2)
    the segment's own page in full precision, causal: the key rows ``own_idx`` picks from ``[k ; prev_k]``."""
    cu_q: torch.Tensor  # [S+1] int32: first row of each segment
    prefix_len: torch.Tensor  # [S] int32: INT8-view keys of each segment (its page index × P)
    prefix_table: torch.Tensor  # [S, max(1, most pages)] int32: the transient copy's page of each of those keys' pages
    has_prefix: torch.Tensor  # [T] bool: rows whose segment has INT8-view keys
    dq_pages: torch.Tensor  # [N8] int64: physical page of each transient page (requests one after another)
    own_idx: torch.Tensor  # [K2] int64: own-page key rows in [k (T rows) ; prev_k (B*P rows)], segment by segment
    cu_k: torch.Tensor  # [S+1] int32: first own-page key of each segment
    max_q: int  # rows of the longest segment
    max_k: int  # own-page keys of the longest segment
    n8: int  # transient pages


def paged_plan(starts, lens, page_table: torch.Tensor, page_size: int) -> PagedPlan:
    """Segments of every request's new positions ``start … start+len-1`` cut at page boundaries; ``page_table``
    [B, ≥ pages] (device) maps logical to physical pages."""
    P, dev, T = page_size, page_table.device, sum(lens)
    cu_q, cu_k, prefix_len, seg_base, own, dq_b, dq_j = [0], [0], [], [], [], [], []
    seg_rows, seg_prefix = [], []
    row, n8 = 0, 0
    for b, (s, n) in enumerate(zip(starts, lens)):
        e = s + n
        need = (e - 1) // P if n else 0  # INT8 pages the request's last query reads
        dq_b += [b] * need
        dq_j += range(need)
        t = s
        while t < e:
            j = t // P
            t1 = min(e, (j + 1) * P)
            cu_q.append(row + t1 - s)
            seg_rows.append(t1 - t)
            seg_prefix.append(j > 0)
            prefix_len.append(j * P)
            seg_base.append(n8)  # the request's transient pages n8 … n8+j-1 are its logical pages 0 … j-1
            if t > j * P:  # own page positions j*P … t-1: the ring copy of request b, rows T + b*P + offset
                own.append(torch.arange(T + b * P, T + b * P + t - j * P))
            own.append(torch.arange(row + t - s, row + t1 - s))
            cu_k.append(cu_k[-1] + t1 - j * P)
            t = t1
        row += n
        n8 += need
    pages = torch.tensor(prefix_len, dtype=torch.int32) // P
    col = torch.arange(max(1, int(pages.max()) if len(prefix_len) else 1), dtype=torch.int32)
    table = torch.where(col[None] < pages[:, None], torch.tensor(seg_base, dtype=torch.int32)[:, None] + col[None], 0)
    has_prefix = torch.repeat_interleave(torch.tensor(seg_prefix, dtype=torch.bool),
                                         torch.tensor(seg_rows, dtype=torch.long), output_size=T)
    idx = lambda x: torch.tensor(x, dtype=torch.long, device=dev)  # noqa: E731
    dq = page_table[idx(dq_b), idx(dq_j)].long() if dq_b else torch.zeros(0, dtype=torch.long, device=dev)
    to = lambda x: x.to(dev, non_blocking=True)  # noqa: E731
    return PagedPlan(
        cu_q=to(torch.tensor(cu_q, dtype=torch.int32)), prefix_len=to(torch.tensor(prefix_len, dtype=torch.int32)),
        prefix_table=to(table), has_prefix=to(has_prefix), dq_pages=dq,
        own_idx=to(torch.cat(own) if own else torch.zeros(0, dtype=torch.long)),
        cu_k=to(torch.tensor(cu_k, dtype=torch.int32)), max_q=max(seg_rows, default=0),
        max_k=max((b - a for a, b in zip(cu_k, cu_k[1:])), default=0), n8=n8)
