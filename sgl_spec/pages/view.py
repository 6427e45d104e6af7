"""``PageScores``: everything a draft page policy reads of the attention backend, as one object.

The backend builds it once (``QuantSpecAttnBackend.scores_view``); a policy never reads the backend itself, so a test
or a benchmark drives a policy with a view of its own buffers (``PageScores.of``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import torch


@dataclasses.dataclass(frozen=True)
class PageScores:
    cfg: Any  # QuantSpecConfig (or any object with its page-budget fields): the policy's options
    # [L, slots, Hkv, MAXP] fp32 page scores, written by each verify by batch row (None: no score-driven drafts)
    scores: Optional[torch.Tensor]
    num_layers: int
    slots: int  # request slots (req_pool_idx range): the policies keep their tables per slot
    kv_heads: int
    max_pages: int  # MAXP: logical pages of the longest request
    device: torch.device
    page_table: Callable[[torch.Tensor], torch.Tensor]  # req_pool_indices [B] -> [B, MAXP] int32 physical page ids
    # () -> (table, div) with page_table(r) == table[r] // div for every slot r, without a copy (None: page_table)
    table_source: Optional[Callable[[], tuple]] = None
    # topk-last only (sgl_spec/experimental/topk_last.py): the KV pool, () -> (verify queries [L, slots, γ+1, Hq, D]
    # or None before the first verify, {layer: softmax scale}), and whether attention must be batch-invariant
    pool: Any = None
    verify_queries: Optional[Callable[[], tuple]] = None
    batch_invariant: bool = True

    @classmethod
    def of(cls, cfg, scores: torch.Tensor, page_table, **kw) -> "PageScores":
        """A view of a bare score buffer [L, slots, Hkv, MAXP] and a page-table function (tests, benchmarks)."""
        L, slots, heads, maxp = scores.shape
        return cls(cfg, scores, L, slots, heads, maxp, scores.device, page_table, **kw)
