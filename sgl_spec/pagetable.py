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
  mode for the acceptance study (sgl_spec/pagestudy.py).
* dense (``--quantspec-dense-draft``): ``backend.draft_mode(window_start)`` without a page list (``DensePages``).

Selections are kept per request slot (``backend.page_scores`` is indexed by batch row and overwritten by the next
verify), so batch filtering/merging between two rounds does not matter.
"""
from __future__ import annotations

import math

import torch

from sgl_spec import ops
from sgl_spec.kernels.select_topk_pages_ref import page_counts
from sgl_spec.pagestudy import PerRequestPages


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
    sparse policies, so they differ only where they are meant to."""

    dense = False

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
        self.ids = torch.zeros((L, slots, self.kcap), dtype=torch.int32, device=dev)
        self.count = torch.zeros((L, slots), dtype=torch.int32, device=dev)

    def recent(self, req_pool_indices, window_start):
        """([L, B, KCAP], [L, B]): logical pages 0 … sinks-1 and the newest k - sinks complete pages."""
        rpi = req_pool_indices.long()
        n, sinks, k = page_counts(torch.div(window_start, self.P, rounding_mode="floor"), self.max_pages,
                                  self.ratio, self.min_pages, self.sink_pages, self.kcap)
        j = torch.arange(self.kcap, device=rpi.device)
        logical = torch.where(j < sinks.unsqueeze(1), j, (n - k).unsqueeze(1) + j)
        table = self.backend.page_table(rpi)
        ids = table.gather(1, logical.clamp(0, table.shape[1] - 1))
        ids = torch.where(j < k.unsqueeze(1), ids, torch.zeros_like(ids))
        L = self.num_layers
        return ids.unsqueeze(0).expand(L, -1, -1), k.to(torch.int32).unsqueeze(0).expand(L, -1)

    def for_round(self, req_pool_indices, window_start, has_pages):
        """(page_ids [L, B, KCAP], num_pages [L, B]) for ``backend.draft_mode``."""
        ids, count = self.recent(req_pool_indices, window_start)
        return ids.contiguous(), count.contiguous()

    def after_verify(self, req_pool_indices, window_start, new_seq_lens):
        pass


class TopkPages(StreamingPages):
    """Top-k pages by the scores the verify wrote (first draft row + bonus row), chosen right after each verify.

    The selection for the next round uses ``num_eligible = new_seq_len // P`` (the pages before the next round's hot
    page). The verify scored pages ``< window_start // P`` only; the one page the window itself completed (if any)
    has no score and is always taken (score +inf): it is the most recent context, the one a draft needs most.

    Two options (same budget k, still ``select_topk_pages``' rule, sinks included):

    * ``recent_share`` (``--quantspec-recent-share``): the newest ``r = floor(share·(k - sinks))`` complete pages are
      forced in (+inf, like the completed page, which is the newest of them), the other ``k - sinks - r`` are the
      best-scored. Local context is what a code model attends to most steadily; the scores then only pick the
      long-range pages.
    * ``score_smoothing`` (``--quantspec-score-smoothing``): rank by a per-slot history of the head-summed scores,
      ``ema``: ``β·history + (1-β)·this verify`` (β = ``--quantspec-score-ema``), or ``max``: the max of this and the
      previous verify's scores, so a page that mattered a round ago is not dropped on one noisy round. Pages the
      previous verify did not score (new pages; every page of a request's first verify) use this verify's score.
      The history lives per request slot ([L, slots, MAXP] fp32, reset on a slot's first round after prefill)."""

    def __init__(self, backend):
        super().__init__(backend)
        cfg = backend.cfg
        self.recent_share = float(getattr(cfg, "recent_share", 0.0))
        self.smoothing = getattr(cfg, "score_smoothing", "none")
        self.beta = float(getattr(cfg, "score_ema", 0.5))
        # forced recent pages per row: at most floor(share * KCAP) (k <= KCAP), and the completed page
        self._share = torch.full((), self.recent_share, dtype=torch.float32, device=self.ids.device)
        self.force_width = max(1, min(self.max_pages, math.floor(float(self._share) * self.kcap)))
        self.hist = self.hist_n = None
        if self.smoothing != "none":
            slots, dev = self.ids.shape[1], self.ids.device
            self.hist = torch.zeros((self.num_layers, slots, self.max_pages), dtype=torch.float32, device=dev)
            self.hist_n = torch.zeros((slots,), dtype=torch.int64, device=dev)  # scored pages held in hist

    def for_round(self, req_pool_indices, window_start, has_pages):
        rpi = req_pool_indices.long()
        if self.hist_n is not None:  # a request's first round: its slot's history belongs to an earlier request
            self.hist_n[rpi] = torch.where(has_pages, self.hist_n[rpi], torch.zeros_like(self.hist_n[rpi]))
        recent, k = self.recent(rpi, window_start)  # not verified yet (first round after prefill)
        ids = torch.where(has_pages.view(1, -1, 1), self.ids[:, rpi], recent)
        count = torch.where(has_pages.view(1, -1), self.count[:, rpi], k)
        return ids.contiguous(), count.contiguous()

    def _score(self, req_pool_indices, window_start, new_seq_lens):
        """Page scores [L, B, Hkv, MAXP] of this verify's batch rows (the verify wrote them already)."""
        return self.backend.page_scores[:, : req_pool_indices.shape[0]]

    def _smooth(self, scores, rpi, j):
        """[L, B, 1, MAXP]: the head-summed scores of pages < j (this verify's), combined with the slot's history."""
        total = scores.sum(dim=2)  # [L, B, MAXP]; entries >= j are stale and never selected (forced or ineligible)
        prev, prev_n = self.hist[:, rpi], self.hist_n[rpi]
        old = (torch.arange(total.shape[-1], device=rpi.device) < prev_n.unsqueeze(1)).unsqueeze(0)  # [1, B, MAXP]
        if self.smoothing == "ema":
            mixed = torch.where(old, self.beta * prev + (1.0 - self.beta) * total, total)
            self.hist[:, rpi] = mixed
        else:  # max of two verifies: the history is the previous verify's own scores
            mixed = torch.where(old, torch.maximum(prev, total), total)
            self.hist[:, rpi] = total
        self.hist_n[rpi] = j
        return mixed.unsqueeze(2)

    def after_verify(self, req_pool_indices, window_start, new_seq_lens):
        B = req_pool_indices.shape[0]
        rpi = req_pool_indices.long()
        scores = self._score(req_pool_indices, window_start, new_seq_lens)
        j = torch.div(window_start, self.P, rounding_mode="floor").long()
        n_next = torch.div(new_seq_lens, self.P, rounding_mode="floor").long()
        if self.hist is not None:
            scores = self._smooth(scores, rpi, j)
        _, sinks, k = page_counts(n_next, self.max_pages, self.ratio, self.min_pages, self.sink_pages, self.kcap)
        r = torch.floor(self._share * (k - sinks).float()).long()
        forced = torch.maximum(r, (n_next > j).long())  # the completed page (if any) is page n_next - 1
        # Forced pages n_next-1, n_next-2, … get +inf in every head (the stale heads of the completed page may hold
        # anything). A gather/scatter of the static width W touches W pages per row, not all MAXP; slots past a
        # row's `forced` rewrite slot 0's page with slot 0's value, so duplicate indices always agree.
        w = torch.arange(self.force_width, device=rpi.device)
        on = w.unsqueeze(0) < forced.unsqueeze(1)  # [B, W]
        idx = torch.where(on, n_next.unsqueeze(1) - 1 - w, (n_next - 1).unsqueeze(1)).clamp(0, self.max_pages - 1)
        L, _, H, _ = scores.shape
        idx4 = idx.view(1, B, 1, -1).expand(L, B, H, -1)
        cur = scores.gather(-1, idx4)
        first = on[:, :1].view(1, B, 1, 1)
        val = torch.where(on.view(1, B, 1, -1) | first, torch.full_like(cur, float("inf")), cur[..., :1])
        scores.scatter_(-1, idx4, val)
        ids, count = ops.select_topk_pages(
            scores, n_next, self.backend.page_table(rpi), self.ratio, self.min_pages, self.sink_pages,
            out_ids=torch.empty((L, B, self.kcap), dtype=torch.int32, device=rpi.device),
            out_count=torch.empty((L, B), dtype=torch.int32, device=rpi.device),
        )
        self.ids[:, rpi] = ids
        self.count[:, rpi] = count


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
            ops.verify_attention(q, pool.page_store(lid), table, pos, hot_k, hot_v, slots, be.verify_scale[li],
                                 scores=scores[li])
        return scores


POLICIES = {"topk": TopkPages, "topk-last": TopkLastPages, "streaming": StreamingPages,
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
