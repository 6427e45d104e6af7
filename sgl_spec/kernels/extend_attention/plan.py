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


def paged_plan(starts, lens, page_table: torch.Tensor, page_size: int) -> PagedPlan:
    """The layout of every request's new positions ``start … start+len-1``; ``page_table`` [B, ≥ pages] (device)
    maps logical to physical pages."""
    P, dev, T = page_size, page_table.device, sum(lens)
    cu_q, a_len, bases, dq_b, dq_j = [0], [], [], [], []
    b_cu_q, b_cu_k, own_pos, own_src, i8_pos, i8_src, seg_rows = [0], [0], [], [], [], [], []
    row, n8, key = 0, 0, 0
    for b, (s, n) in enumerate(zip(starts, lens)):
        e = s + n
        need = (e - 1) // P if n else 0  # INT8 pages the request's last query reads
        cu_q.append(row + n)
        a_len.append(max(e - P, 0) if n else 0)
        bases.append((n8, need))
        dq_b += [b] * need
        dq_j += range(need)
        t = s
        while t < e:
            j = t // P
            t1 = min(e, (j + 1) * P)
            if j > 0:  # page j-1's INT8 view: rows (n8 + j-1) * P … of the copy
                i8_pos.append(torch.arange(key, key + P))
                i8_src.append(torch.arange((n8 + j - 1) * P, (n8 + j) * P))
                key += P
            if t > j * P:  # own page positions j*P … t-1: the ring copy of request b, rows T + b*P + offset
                own_pos.append(torch.arange(key, key + t - j * P))
                own_src.append(torch.arange(T + b * P, T + b * P + t - j * P))
                key += t - j * P
            own_pos.append(torch.arange(key, key + t1 - t))
            own_src.append(torch.arange(row + t - s, row + t1 - s))
            key += t1 - t
            b_cu_q.append(b_cu_q[-1] + t1 - t)
            b_cu_k.append(key)
            seg_rows.append(t1 - t)
            t = t1
        row += n
        n8 += need
    width = max([1] + [need for _, need in bases])
    col = torch.arange(width, dtype=torch.int32)
    base = torch.tensor([x for x, _ in bases], dtype=torch.int32)
    npg = torch.tensor([x for _, x in bases], dtype=torch.int32)
    table = torch.where(col[None] < npg[:, None], base[:, None] + col[None], 0)
    idx = lambda x: torch.tensor(x, dtype=torch.long, device=dev)  # noqa: E731
    dq = page_table[idx(dq_b), idx(dq_j)].long() if dq_b else torch.zeros(0, dtype=torch.long, device=dev)
    to = lambda x: x.to(dev, non_blocking=True)  # noqa: E731
    cat = lambda xs: to(torch.cat(xs) if xs else torch.zeros(0, dtype=torch.long))  # noqa: E731
    i32 = lambda x: to(torch.tensor(x, dtype=torch.int32))  # noqa: E731
    return PagedPlan(
        cu_q=i32(cu_q), a_len=i32(a_len), a_table=to(table), dq_pages=dq, b_cu_q=i32(b_cu_q), b_cu_k=i32(b_cu_k),
        b_own_pos=cat(own_pos), b_own_src=cat(own_src), b_int8_pos=cat(i8_pos), b_int8_src=cat(i8_src),
        max_q=max(lens, default=0), b_max_q=max(seg_rows, default=0),
        b_max_k=max((y - x for x, y in zip(b_cu_k, b_cu_k[1:])), default=0), n8=n8, b_keys=key)
