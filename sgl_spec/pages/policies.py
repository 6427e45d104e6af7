"""Draft page policies (``--quantspec-draft-pages``): which quantized pages each request's draft reads, per layer.

A draft may read anything without changing the output (docs/CONTRACTS.md, "The attention view"); the policy only
trades draft bandwidth for acceptance. Every sparse policy has the same page budget per request and layer,
``select_topk_pages``' rule ``k = min(n, max(min_pages, ceil(ratio·n)))`` over the ``n = window_start // P`` complete
pages before the hot page, sink pages included, so the acceptance study (bench/bench_acceptance.py) compares like
with like:

* ``topk`` (QuantSpec's Collect-2-Query): the pages with the highest verify scores, max over the first draft row and
  the bonus row of the window (``verify_attention``'s default ``score_rows``), summed over KV heads.
* ``topk-head`` (default): the same per KV head (``TopkHeadPages``).
* ``streaming`` (StreamingLLM): the sink pages and the most recent pages. No scores: the verify skips them.
* dense (``--quantspec-dense-draft``): ``backend.draft_mode(window_start)`` without a page list (``DensePages``).
* study policies, imported only when chosen (``EXPERIMENTAL``): ``topk-last`` (sgl_spec/experimental/topk_last.py)
  and ``per-request`` (sgl_spec/experimental/page_study.py).

A policy reads the backend only through its ``PageScores`` view (sgl_spec/pages/view.py). Selections are kept per
request slot (the view's ``scores`` are indexed by batch row and overwritten by the next verify), so batch
filtering/merging between two rounds does not matter.
"""
from __future__ import annotations

import math

import torch

from sgl_spec.kernels.select_topk_pages import select_topk_pages
from sgl_spec.pages.view import PageScores


class DensePages:
    """Every complete page (upper plane). Also the fallback for a backend without page scores."""

    dense = True

    def for_round(self, req_pool_indices, window_start, has_pages):
        return None, None  # draft_mode(window_start, None, None) is the dense mode

    def after_verify(self, req_pool_indices, window_start, new_seq_lens, scores=None):
        pass


class StreamingPages:
    """Sink pages + the newest pages, within the top-k budget. Also every policy's first round after prefill.

    Why not dense for that first round (there are no scores yet): the backend's draft mode is dense *or* sparse for a
    whole batch, so a request that has just been prefilled would turn every running request of its batch dense for a
    round (a bandwidth spike whenever a request joins), or need a page list of capacity MAXP per request. It concerns
    one round of γ tokens; recency is the natural prior without scores, and it keeps that round the same for all
    sparse policies, so they differ only where they are meant to.

    Every selection is one ``select_topk_pages`` launch (streaming = no scores, recent share 1), reading the page
    table straight from ``req_to_token`` by slot (the view's ``table_source``): no other device op."""

    dense = False
    per_head = False  # True: one page list per kv head (TopkHeadPages), tables [L, slots, Hkv, KCAP]

    def __init__(self, view: PageScores):
        cfg = view.cfg
        self.view = view
        self.P = cfg.page_size
        self.ratio, self.min_pages, self.sink_pages = cfg.topk_ratio, cfg.min_pages, cfg.sink_pages
        L, slots, self.max_pages, dev = view.num_layers, view.slots, view.max_pages, view.device
        self.num_layers = L
        # Fixed capacity (CUDA graphs): the largest budget any request can get.
        self.kcap = min(self.max_pages, max(cfg.min_pages, cfg.sink_pages, math.ceil(cfg.topk_ratio * self.max_pages)))
        # kv heads of a per-head table (None: one list per layer and request)
        self.heads = view.kv_heads if self.per_head else None
        self.ids = torch.zeros(self._table_shape(L, slots), dtype=torch.int32, device=dev)
        self.count = torch.zeros((L, slots), dtype=torch.int32, device=dev)

    def _table_shape(self, L, B):
        return (L, B, self.heads, self.kcap) if self.per_head else (L, B, self.kcap)

    def _select(self, scores, req_pool_indices, num_tokens, out_ids, out_count, **kw):
        """select_topk_pages with this policy's budget; ``num_tokens [B]``: tokens before the pages' end (÷ P)."""
        src = self.view.table_source
        if src is not None:
            table, div = src()
            trows = req_pool_indices
        else:  # no req_to_token (unit tests): the page table by batch row, in token units
            table, div, trows = self.view.page_table(req_pool_indices).long() * self.P, self.P, None
        return select_topk_pages(scores, num_tokens, table, self.ratio, self.min_pages, self.sink_pages,
                                     out_ids, out_count, per_head=self.per_head, table_rows=trows, page_div=div, **kw)

    def for_round(self, req_pool_indices, window_start, has_pages):
        """(page_ids [L, B, KCAP] (per head: [L, B, Hkv, KCAP]), num_pages [L, B]) for ``backend.draft_mode``:
        logical pages 0 … sinks-1 and the newest k - sinks complete pages before ``window_start``."""
        L, B = self.num_layers, req_pool_indices.shape[0]
        ids = torch.empty(self._table_shape(L, B), dtype=torch.int32, device=self.ids.device)
        count = torch.empty((L, B), dtype=torch.int32, device=self.ids.device)
        return self._select(None, req_pool_indices, window_start, ids, count, recent_share=1.0)

    def after_verify(self, req_pool_indices, window_start, new_seq_lens, scores=None):
        pass


class TopkPages(StreamingPages):
    """Top-k pages by the scores the verify wrote (first draft row + bonus row), chosen right after each verify.

    The selection for the next round uses ``num_eligible = new_seq_len // P`` (the pages before the next round's hot
    page). The verify scored pages ``< window_start // P`` only; the one page the window itself completed (if any)
    has no score and is always taken (score +inf, select_topk_pages' ``num_scored``): it is the most recent context,
    the one a draft needs most.

    Two options (same budget k, still ``select_topk_pages``' rule, sinks included), both inside the same launch:

    * ``recent_share`` (``--quantspec-recent-share``): the newest ``r = floor(share·(k - sinks))`` complete pages are
      forced in (+inf, like the completed page, which is the newest of them), the other ``k - sinks - r`` are the
      best-scored. Local context is what a code model attends to most steadily; the scores then only pick the
      long-range pages.
    * ``score_smoothing`` (``--quantspec-score-smoothing``): rank by a per-slot history of the head-summed scores,
      ``ema``: ``β·history + (1-β)·this verify`` (β = ``--quantspec-score-ema``), or ``max``: the max of this and the
      previous verify's scores, so a page that mattered a round ago is not dropped on one noisy round. Pages the
      previous verify did not score (new pages; every page of a request's first verify) use this verify's score.
      The history lives per request slot ([L, slots, 1, MAXP] fp32 + its length [L, slots, 1], reset on a slot's
      first round after prefill).

    Per round: ``for_round`` = one launch (streaming pages into the slots of requests without a verify yet, which
    also resets their history) + two gathers; ``after_verify`` = one launch writing the slots' tables in place."""

    def __init__(self, view: PageScores):
        super().__init__(view)
        cfg = view.cfg
        self.recent_share = float(getattr(cfg, "recent_share", 0.0))
        self.smoothing = getattr(cfg, "score_smoothing", "none")
        self.beta = float(getattr(cfg, "score_ema", 0.5))
        self.hist = self.hist_n = None
        if self.smoothing != "none":
            L, slots, dev = self.num_layers, self.ids.shape[1], self.ids.device
            G = self.heads or 1
            self.hist = torch.zeros((L, slots, G, self.max_pages), dtype=torch.float32, device=dev)
            self.hist_n = torch.zeros((L, slots, G), dtype=torch.int32, device=dev)  # scored pages held in hist

    def _history(self):
        return dict(hist=self.hist, hist_n=self.hist_n, smoothing=self.smoothing, ema=self.beta)

    def for_round(self, req_pool_indices, window_start, has_pages):
        # a request's first round (not verified yet): streaming pages into its slot; its slot's history belonged to
        # an earlier request and is reset by the same launch
        self._select(None, req_pool_indices, window_start, self.ids, self.count, rows=req_pool_indices,
                     skip=has_pages, recent_share=1.0, **self._history())
        rpi = req_pool_indices.long()
        return self.ids[:, rpi], self.count[:, rpi]

    def _score(self, req_pool_indices, window_start, new_seq_lens):
        """Page scores [L, B, Hkv, MAXP] of this verify's batch rows (the verify wrote them already)."""
        return self.view.scores[:, : req_pool_indices.shape[0]]

    def after_verify(self, req_pool_indices, window_start, new_seq_lens, scores=None):
        """``scores`` [L, B, Hkv, MAXP]: this batch's rows (default: the verify's, ``_score``)."""
        if scores is None:
            scores = self._score(req_pool_indices, window_start, new_seq_lens)
        self._select(scores, req_pool_indices, new_seq_lens, self.ids, self.count, rows=req_pool_indices,
                     num_scored=window_start, recent_share=self.recent_share, **self._history())


class TopkHeadPages(TopkPages):
    """``topk-head``: every kv head of every layer gets its own top-k pages, ranked by its own score only (the sum
    over its query-head group of the max over the two score rows: ``page_scores[l, b, h]`` as the verify writes it),
    instead of one list per layer ranked by the sum over all kv heads. Same budget k per head (sinks, forced
    completed / recent pages, smoothing per head), so a draft reads as many pages as with ``topk``; GQA heads that
    attend to different pages each get theirs. draft_decode reads ``page_ids[b, h]`` (tables [L, B, Hkv, KCAP])."""

    per_head = True


POLICIES = {"topk": TopkPages, "topk-head": TopkHeadPages, "streaming": StreamingPages}
EXPERIMENTAL = ("topk-last", "per-request")  # study policies: imported by policy_class() only when the flag names them


def policy_class(name: str):
    """The policy class of a ``--quantspec-draft-pages`` value (a study policy's module is imported here)."""
    if name in POLICIES:
        return POLICIES[name]
    if name == "topk-last":
        from sgl_spec.experimental.topk_last import TopkLastPages

        return TopkLastPages
    if name == "per-request":
        from sgl_spec.experimental.page_study import PerRequestPages

        return PerRequestPages
    raise ValueError(f"unknown draft page policy {name!r}")


def draft_pages(backend) -> "DensePages | StreamingPages":
    """The draft page policy for ``backend`` (its ``cfg``), built on its ``scores_view()``. Dense when the config says
    so, and for a backend without a config (stock/test backends) or without the page scores a score-driven policy
    needs."""
    cfg = getattr(backend, "cfg", None)
    if cfg is None or getattr(cfg, "dense_draft", False):
        return DensePages()
    view = backend.scores_view()
    policy = getattr(cfg, "draft_pages", "topk")
    if policy != "streaming" and view.scores is None:
        return DensePages()
    return policy_class(policy)(view)
