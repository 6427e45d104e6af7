"""The acceptance study's configurations (bench/bench_acceptance.py): policy names, grids, and which configurations
share a server.

A policy name is ``dense``, ``streaming``, ``topk-last`` or ``topk[+r<share>][+ema<β>|+max]`` (top-k with a recent
share and/or score smoothing, sgl_spec/pages/policies.py), or ``topk-head[...]`` (the same per kv head: each kv head of a
layer its own top-k pages), each with ``+lse`` for log-sum-exp page scores (``--quantspec-page-score lse``: a server
flag, so per-request servers are split by score kind). A configuration is a dict(policy, ratio (None for dense), gamma).
"""
from __future__ import annotations

LABEL_KEY = "quantspec_draft"  # sgl_spec/experimental/page_study.py (not imported: the bench runs without the server's packages)


# The select grid's default: StreamingLLM, plain top-k, and top-k with recent pages and/or score smoothing.
SELECT_POLICIES = ["dense", "streaming", "topk", "topk+r0.25", "topk+r0.5", "topk+ema0.5", "topk+max",
                   "topk+r0.25+ema0.5"]


def policy_flags(policy):
    """Server flags of a policy name (None: not a policy). Options are always explicit, so a row means the same
    thing whatever the server's defaults are."""
    if policy in ("dense", "streaming"):
        return ["--quantspec-dense-draft"] if policy == "dense" else ["--quantspec-draft-pages", "streaming"]
    base, *opts = policy.split("+")
    if base not in ("topk", "topk-head", "topk-last"):
        return None
    share, smooth, kind = "0", ["--quantspec-score-smoothing", "none"], []
    for o in opts:
        try:
            if o == "lse":
                kind = ["--quantspec-page-score", "lse"]
            elif o == "max":
                smooth = ["--quantspec-score-smoothing", "max"]
            elif o.startswith("ema"):
                smooth = ["--quantspec-score-smoothing", "ema", "--quantspec-score-ema", str(float(o[3:]))]
            elif o.startswith("r"):
                share = str(float(o[1:]))
            else:
                return None
        except ValueError:
            return None
    return ["--quantspec-draft-pages", base, "--quantspec-recent-share", share, *smooth, *kind]


def page_score(cfg) -> str:
    """The server's --quantspec-page-score for a configuration ("lse" when its policy name has +lse)."""
    return "lse" if "lse" in cfg["policy"].split("+")[1:] else "max"


def shareable(a, cfg) -> bool:
    """Whether a per-request server can run this configuration (streaming, topk*, topk-head*; not dense or
    topk-last)."""
    return a.per_request and cfg["policy"].split("+")[0] in ("topk", "topk-head", "streaming")


def grid(a) -> list[dict]:
    """Configurations: dicts with policy, ratio (None for dense) and gamma, in run order."""
    def cfgs(policy, gamma, ratios):
        if policy not in a.policies or gamma not in a.gammas:
            return []
        if policy == "dense":
            return [dict(policy="dense", ratio=None, gamma=gamma)]
        return [dict(policy=policy, ratio=r, gamma=gamma) for r in ratios]

    if a.smoke:  # one per-request server (two policies) and one of its own
        return [dict(policy="topk-last", ratio=0.07, gamma=4), dict(policy="streaming", ratio=0.07, gamma=4),
                dict(policy="topk+r0.25+ema0.5", ratio=0.07, gamma=4)]
    out = []
    if a.grid == "select":
        return [c for g in a.gammas for p in a.policies for c in cfgs(p, g, a.ratios)]
    for g in a.gammas:
        full = a.grid == "full" or g == 4
        mid = [a.ratios[len(a.ratios) // 2]] if a.ratios else []
        out += cfgs("dense", g, [])
        out += cfgs("topk", g, a.ratios if full else mid)
        out += cfgs("streaming", g, a.ratios if full else mid)
        out += cfgs("topk-last", g, a.last_ratios if full else a.last_ratios[:1])
    return out


def jobs(a, configs) -> list[dict]:
    """Server launches: one per (γ, page score kind) for the shareable configurations (per-request), one per other
    configuration."""
    out, shared = [], {}
    for cfg in configs:
        if shareable(a, cfg):
            key = (cfg["gamma"], page_score(cfg))
            if key not in shared:
                shared[key] = dict(gamma=cfg["gamma"], configs=[], shared=True)
                out.append(shared[key])
            shared[key]["configs"].append(cfg)
        else:
            out.append(dict(gamma=cfg["gamma"], configs=[cfg], shared=False))
    return out


def label(cfg) -> str:
    """The per-request label of a configuration (sgl_spec/experimental/page_study.py); +lse is the server's flag, not the label's."""
    name = "+".join(x for x in cfg["policy"].split("+") if x != "lse")
    return f"{name}@{cfg['ratio']}"
