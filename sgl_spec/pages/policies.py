"""Draft page policies (``--quantspec-draft-pages``): which quantized pages each request's draft reads, per layer.

A draft may read anything without changing the output (docs/CONTRACTS.md, "The attention view"); the policy only
trades draft bandwidth for acceptance. Every sparse policy has the same page budget per request and layer,
``select_topk_pages``' rule ``k = min(n, max(min_pages, ceil(ratio·n)))`` over the ``n = window_start // P`` complete
pages before the hot page, sink pages included, so the acceptance study (bench/bench_acceptance.py) compares like
with like:

* ``topk`` (default; QuantSpec's Collect-2-Query): the pages with the highest verify scores, max over the first draft
  row and the bonus row of the window (``verify_attention``'s default ``score_rows``), summed over KV heads.
* ``topk-last``: the same selection from one query: the window row of the *last accepted token* (row n of
  ``[t, d_1 … d_γ]`` when n drafts were accepted). n is only known after the verify, and ``score_rows`` is one static
  pair per launch, so the verify keeps its queries (``backend.verify_q``) instead of scoring, and ``after_verify``
  scores row n of each request with ``verify_attention`` on that single row at its true position (one-row window:
  score rows (0, 0)). One extra attention pass per layer and round: a study policy, not a fast path.
* ``streaming`` (StreamingLLM): the sink pages and the most recent pages. No scores: the verify skips them.
* ``per-request``: each request names one of the above (topk with its options, or streaming) and its ratio; a
  mode for the acceptance study (sgl_spec/experimental/page_study.py).
* dense (``--quantspec-dense-draft``): ``backend.draft_mode(window_start)`` without a page list (``DensePages``).

Selections are kept per request slot (``backend.page_scores`` is indexed by batch row and overwritten by the next
verify), so batch filtering/merging between two rounds does not matter.
"""
from __future__ import annotations

import math

import torch

from sgl_spec.kernels.select_topk_pages import select_topk_pages
from sgl_spec.kernels.verify_attention import verify_attention
from sgl_spec.experimental.page_study import PerRequestPages


class DensePages:
    """Every complete page (upper plane). Also the fallback for a backend without page scores."""

    dense = True

    def for_round(self, req_pool_indices, window_start, has_pages):
        return None, None  # draft_mode(window_start, None, None) is the dense mode

    def after_verify(self, req_pool_indices, window_start, new_seq_lens):
        pass


class StreamingPages:
    """Sink pages + the newest pages, within the top-k budget. Also every policy's first round after prefill.

    Why not dense for that first round (there are no scores yet): the backend's draft mode is dense *or* sparse for a
    whole batch, so a request that has just been prefilled would turn every running request of its batch dense for a
    round (a bandwidth spike whenever a request joins), or need a page list of capacity MAXP per request. It concerns
    one round of γ tokens; recency is the natural prior without scores, and it keeps that round the same for all
    sparse policies, so they differ only where they are meant to.

    Every selection is one ``select_topk_pages`` launch (streaming = no scores, recent share 1), reading the page
    table straight from ``req_to_token`` by slot (``backend.page_table_source``): no other device op."""

    dense = False
    per_head = False  # True: one page list per kv head (TopkHeadPages), tables [L, slots, Hkv, KCAP]

    def __init__(self, backend):
        cfg = backend.cfg
        self.backend = backend
        self.P = cfg.page_size
        self.ratio, self.min_pages, self.sink_pages = cfg.topk_ratio, cfg.min_pages, cfg.sink_pages
        if getattr(backend, "page_scores", None) is not None:
            L, slots, _, self.max_pages = backend.page_scores.shape
            dev = backend.page_scores.device
        else:
            L, slots = backend.token_to_kv_pool.layer_num, backend.req_to_token_pool.req_to_token.shape[0]
            self.max_pages, dev = backend.max_pages, backend.device
        self.num_layers = L
        # Fixed capacity (CUDA graphs): the largest budget any request can get.
        self.kcap = min(self.max_pages, max(cfg.min_pages, cfg.sink_pages, math.ceil(cfg.topk_ratio * self.max_pages)))
        # kv heads of a per-head table (None: one list per layer and request)
        self.heads = self._kv_heads(backend) if self.per_head else None
        self.ids = torch.zeros(self._table_shape(L, slots), dtype=torch.int32, device=dev)
        self.count = torch.zeros((L, slots), dtype=torch.int32, device=dev)

    @staticmethod
    def _kv_heads(backend):
        if getattr(backend, "page_scores", None) is not None:
            return backend.page_scores.shape[2]
        return backend.token_to_kv_pool.head_num

    def _table_shape(self, L, B):
        return (L, B, self.heads, self.kcap) if self.per_head else (L, B, self.kcap)

    def _select(self, scores, req_pool_indices, num_tokens, out_ids, out_count, **kw):
        """select_topk_pages with this policy's budget; ``num_tokens [B]``: tokens before the pages' end (÷ P)."""
        src = getattr(self.backend, "page_table_source", None)
        if src is not None:
            table, div = src()
            trows = req_pool_indices
        else:  # a backend without req_to_token (unit tests): its page table by batch row, in token units
            table, div, trows = self.backend.page_table(req_pool_indices).long() * self.P, self.P, None
        return select_topk_pages(scores, num_tokens, table, self.ratio, self.min_pages, self.sink_pages,
                                     out_ids, out_count, per_head=self.per_head, table_rows=trows, page_div=div, **kw)

    def for_round(self, req_pool_indices, window_start, has_pages):
        """(page_ids [L, B, KCAP] (per head: [L, B, Hkv, KCAP]), num_pages [L, B]) for ``backend.draft_mode``:
        logical pages 0 … sinks-1 and the newest k - sinks complete pages before ``window_start``."""
        L, B = self.num_layers, req_pool_indices.shape[0]
        ids = torch.empty(self._table_shape(L, B), dtype=torch.int32, device=self.ids.device)
        count = torch.empty((L, B), dtype=torch.int32, device=self.ids.device)
        return self._select(None, req_pool_indices, window_start, ids, count, recent_share=1.0)

    def after_verify(self, req_pool_indices, window_start, new_seq_lens):
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

    def __init__(self, backend):
        super().__init__(backend)
        cfg = backend.cfg
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
        return self.backend.page_scores[:, : req_pool_indices.shape[0]]

    def after_verify(self, req_pool_indices, window_start, new_seq_lens):
        scores = self._score(req_pool_indices, window_start, new_seq_lens)
        self._select(scores, req_pool_indices, new_seq_lens, self.ids, self.count, rows=req_pool_indices,
                     num_scored=window_start, recent_share=self.recent_share, **self._history())


class TopkLastPages(TopkPages):
    """Top-k pages by the score of each request's last accepted token (see the module docstring)."""

    def _score(self, req_pool_indices, window_start, new_seq_lens):
        be = self.backend
        pool = be.token_to_kv_pool
        B = req_pool_indices.shape[0]
        scores = be.page_scores[:, :B]
        if be.verify_q is None:  # no verify ran (cannot happen after one): keep the (stale) scores
            return scores
        rows = torch.arange(B, device=req_pool_indices.device)
        last = (new_seq_lens - window_start - 1).long()  # window row of the last accepted token
        pos = (new_seq_lens - 1).to(torch.int32)  # ... and its position
        table = be.page_table(req_pool_indices)
        slots = req_pool_indices.to(torch.int32)
        for li in range(scores.shape[0]):
            lid = li + pool.start_layer
            hot_k, hot_v = pool.hot(lid)
            q = be.verify_q[li, rows, last].unsqueeze(1)  # [B, 1, Hq, D]
            # The ring still holds the verify's K/V and the pages it completed are quantized: this row attends (and
            # scores pages < pos // P) exactly as it did inside the verify.
            verify_attention(q, pool.page_store(lid), table, pos, hot_k, hot_v, slots, be.verify_scale[li],
                                 scores=scores[li], score_kind=getattr(be.cfg, "page_score", "max"),
                                 batch_invariant=getattr(be, "batch_invariant", True))
        return scores


class TopkHeadPages(TopkPages):
    """``topk-head``: every kv head of every layer gets its own top-k pages, ranked by its own score only (the sum
    over its query-head group of the max over the two score rows: ``page_scores[l, b, h]`` as the verify writes it),
    instead of one list per layer ranked by the sum over all kv heads. Same budget k per head (sinks, forced
    completed / recent pages, smoothing per head), so a draft reads as many pages as with ``topk``; GQA heads that
    attend to different pages each get theirs. draft_decode reads ``page_ids[b, h]`` (tables [L, B, Hkv, KCAP])."""

    per_head = True


POLICIES = {"topk": TopkPages, "topk-head": TopkHeadPages, "topk-last": TopkLastPages, "streaming": StreamingPages,
            "per-request": PerRequestPages}


def draft_pages(backend) -> "DensePages | StreamingPages":
    """The draft page policy for ``backend`` (its ``cfg``). Dense when the config says so, and for a backend without
    a config (stock/test backends) or without the page scores a score-driven policy needs."""
    cfg = getattr(backend, "cfg", None)
    if cfg is None or getattr(cfg, "dense_draft", False):
        return DensePages()
    policy = getattr(cfg, "draft_pages", "topk")
    if policy != "streaming" and getattr(backend, "page_scores", None) is None:
        return DensePages()
    return POLICIES[policy](backend)
