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
