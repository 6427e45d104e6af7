"""Per-request draft page policies (``--quantspec-draft-pages per-request``): a mode for the acceptance study.

Each request names its draft page policy in ``sampling_params.custom_params["quantspec_draft"]`` with a label
``<policy>[+r<share>][+ema<β>|+max][@<ratio>]`` (``LABEL_KEY``), e.g. ``streaming@0.03``, ``topk@0.07``,
``topk+r0.25+ema0.5@0.15``, ``topk-head@0.07``. A label sets the policy (``topk``, ``topk-head`` (per-kv-head tables)
or ``streaming``), its recent share, its score smoothing and its page ratio; everything not in the label is plain (share 0, no smoothing, the server's ratio), and
the budget rule (min/sink pages) is the server's. A request without a label gets the server's own flags as ``topk``.

Why: with labels one server per γ serves every (policy, ratio) of the study, the requests of all policies batched
together, instead of one server launch per configuration. Every policy keeps its own per-slot state (tables, score
history) and reads the same verify scores, so a request's pages are exactly what the same policy would pick in a
server of its own (bench/bench_acceptance.py ``--per-request``). Not for ``topk-last`` (its verify keeps queries
instead of scoring) and not for dense drafting (dense is one mode for a whole batch).

Cost: every round runs each labelled policy on its own rows (a few small launches per label), and the draft page
lists have the largest capacity of the labels in the batch; fine for a study, not a serving mode.
"""
from __future__ import annotations

import dataclasses

import torch

from sgl_spec.pages.policies import POLICIES
from sgl_spec.pages.view import PageScores

LABEL_KEY = "quantspec_draft"


def label_config(label: str, cfg):
    """The QuantSpecConfig of a label (see the module docstring); ValueError for a malformed one."""
    name, at, ratio = label.partition("@")
    base, *opts = name.split("+")
    if base not in ("topk", "topk-head", "streaming") or (base == "streaming" and opts):
        raise ValueError(f"quantspec draft label {label!r}: expected topk[-head][+r<share>][+ema<β>|+max][@ratio] or "
                         "streaming[@ratio]")
    kw = dict(draft_pages=base, recent_share=0.0, score_smoothing="none")
    try:
        if at:
            kw["topk_ratio"] = float(ratio)
        for o in opts:
            if o.startswith("ema"):
                kw.update(score_smoothing="ema", score_ema=float(o[3:]))
            elif o == "max":
                kw["score_smoothing"] = "max"
            elif o.startswith("r"):
                kw["recent_share"] = float(o[1:])
            else:
                raise ValueError(o)
    except ValueError:
        raise ValueError(f"quantspec draft label {label!r}: bad option") from None
    if not (0 < kw.get("topk_ratio", cfg.topk_ratio) <= 1 and 0 <= kw["recent_share"] <= 1
            and 0 <= kw.get("score_ema", 0.0) < 1):
        raise ValueError(f"quantspec draft label {label!r}: ratio in (0, 1], share in [0, 1], ema in [0, 1)")
    return dataclasses.replace(cfg, **kw)


class PerRequestPages:
    dense = False
    per_request = True

    def __init__(self, view: PageScores):
        self.view = view
        self.default_cfg = dataclasses.replace(view.cfg, draft_pages="topk")
        self.policies = {}  # label -> policy (on the server's view with the label's cfg)
        self.groups = []  # this batch: (policy, row indices), set by assign()

    def _policy(self, label):
        if label not in self.policies:
            cfg = self.default_cfg if label is None else label_config(label, self.view.cfg)
            self.policies[label] = POLICIES[cfg.draft_pages](dataclasses.replace(self.view, cfg=cfg))
        return self.policies[label]

    def assign(self, reqs):
        """Group the batch rows by their requests' labels (host data: no device sync)."""
        rows = {}
        for i, r in enumerate(reqs):
            params = getattr(r.sampling_params, "custom_params", None)
            label = params.get(LABEL_KEY) if isinstance(params, dict) else None
            rows.setdefault(label, []).append(i)
        dev = self.view.device
        self.groups = [(self._policy(lb), torch.tensor(ix, dtype=torch.long, device=dev)) for lb, ix in rows.items()]

    def for_round(self, req_pool_indices, window_start, has_pages):
        B = req_pool_indices.shape[0]
        first = self.groups[0][0] if self.groups else self._policy(None)
        kcap = max([first.kcap] + [p.kcap for p, _ in self.groups])
        # one layout for the batch: per kv head as soon as one label is per head (per-layer lists are broadcast)
        heads = max([p.heads or 0 for p, _ in self.groups] + [0])
        dev = req_pool_indices.device
        L = first.num_layers
        ids = torch.zeros((L, B, heads, kcap) if heads else (L, B, kcap), dtype=torch.int32, device=dev)
        count = torch.zeros((L, B), dtype=torch.int32, device=dev)
        for pol, rows in self.groups:
            i, c = pol.for_round(req_pool_indices[rows], window_start[rows], has_pages[rows])
            if heads and not pol.per_head:
                i = i.unsqueeze(2)
            ids[:, rows, ..., : i.shape[-1]] = i.to(ids.dtype)
            count[:, rows] = c.to(count.dtype)
        return ids, count

    def after_verify(self, req_pool_indices, window_start, new_seq_lens, scores=None):
        full = self.view.scores[:, : req_pool_indices.shape[0]] if scores is None else scores
        for pol, rows in self.groups:
            # a copy of this label's rows, in its row order (0 … n-1)
            pol.after_verify(req_pool_indices[rows], window_start[rows], new_seq_lens[rows], scores=full[:, rows])
