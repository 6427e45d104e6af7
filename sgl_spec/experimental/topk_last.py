"""``--quantspec-draft-pages topk-last``: top-k pages by the score of each request's last accepted token (a study
policy, imported only when that flag is given: sgl_spec/pages/policies.py ``EXPERIMENTAL``).

The selection comes from one query: the window row of the *last accepted token* (row n of ``[t, d_1 … d_γ]`` when n
drafts were accepted). n is only known after the verify, and ``score_rows`` is one static pair per launch, so the
verify keeps its queries (the backend's ``keep_verify_q``) instead of scoring, and ``after_verify`` scores row n of
each request with ``verify_attention`` on that single row at its true position (one-row window: score rows (0, 0)).
One extra attention pass per layer and round: a study policy, not a fast path.
"""
from __future__ import annotations

import torch

from sgl_spec.kernels.verify_attention import verify_attention
from sgl_spec.pages.policies import TopkPages


class TopkLastPages(TopkPages):
    def _score(self, req_pool_indices, window_start, new_seq_lens):
        view = self.view
        pool = view.pool
        B = req_pool_indices.shape[0]
        scores = view.scores[:, :B]
        verify_q, verify_scale = view.verify_queries()
        if verify_q is None:  # no verify ran (cannot happen after one): keep the (stale) scores
            return scores
        rows = torch.arange(B, device=req_pool_indices.device)
        last = (new_seq_lens - window_start - 1).long()  # window row of the last accepted token
        pos = (new_seq_lens - 1).to(torch.int32)  # ... and its position
        table = view.page_table(req_pool_indices)
        slots = req_pool_indices.to(torch.int32)
        for li in range(scores.shape[0]):
            lid = li + pool.start_layer
            hot_k, hot_v = pool.hot(lid)
            q = verify_q[li, rows, last].unsqueeze(1)  # [B, 1, Hq, D]
            # The ring still holds the verify's K/V and the pages it completed are quantized: this row attends (and
            # scores pages < pos // P) exactly as it did inside the verify.
            verify_attention(q, pool.page_store(lid), table, pos, hot_k, hot_v, slots, verify_scale[li],
                             scores=scores[li], score_kind=getattr(view.cfg, "page_score", "max"),
                             batch_invariant=view.batch_invariant)
        return scores
