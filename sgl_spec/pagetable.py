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
* dense (``--quantspec-dense-draft``): ``backend.draft_mode(window_start)`` without a page list (``DensePages``).

Selections are kept per request slot (``backend.page_scores`` is indexed by batch row and overwritten by the next
verify), so batch filtering/merging between two rounds does not matter.
"""
from __future__ import annotations

import math

import torch

from sgl_spec import ops
from sgl_spec.kernels.select_topk_pages_ref import page_counts


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
    has no score and is always taken (score +inf): it is the most recent context, the one a draft needs most."""

    def for_round(self, req_pool_indices, window_start, has_pages):
        rpi = req_pool_indices.long()
        recent, k = self.recent(rpi, window_start)  # not verified yet (first round after prefill)
        ids = torch.where(has_pages.view(1, -1, 1), self.ids[:, rpi], recent)
        count = torch.where(has_pages.view(1, -1), self.count[:, rpi], k)
        return ids.contiguous(), count.contiguous()

    def _score(self, req_pool_indices, window_start, new_seq_lens):
        """Page scores [L, B, Hkv, MAXP] of this verify's batch rows (the verify wrote them already)."""
        return self.backend.page_scores[:, : req_pool_indices.shape[0]]

    def after_verify(self, req_pool_indices, window_start, new_seq_lens):
        B = req_pool_indices.shape[0]
        rpi = req_pool_indices.long()
        scores = self._score(req_pool_indices, window_start, new_seq_lens)
        rows = torch.arange(B, device=rpi.device)
        j = torch.div(window_start, self.P, rounding_mode="floor").long()
        n_next = torch.div(new_seq_lens, self.P, rounding_mode="floor")
        jj = j.clamp(max=self.max_pages - 1)
        cur = scores[:, rows, :, jj]  # [B, L, Hkv] (advanced indices split by a slice come first)
        scores[:, rows, :, jj] = torch.where((n_next > j).view(B, 1, 1), torch.full_like(cur, float("inf")), cur)
        L = scores.shape[0]
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


POLICIES = {"topk": TopkPages, "topk-last": TopkLastPages, "streaming": StreamingPages}


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
