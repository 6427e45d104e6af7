"""bench_e2e.py's results file: rows merged across runs, fields derived from other rows, the cost-model fit.

``bench/results/e2e.json``::

    {"meta": {...last run...}, "runs": [...every run's meta...],
     "rows": [{mode, model, batch, ctx, gamma, tok_per_s, baseline_tok_per_s, speedup, accept_length, itl_p50_ms,
               kv_bytes_per_token, device, sglang, status, ...}],
     "models": {name: {"config": HF config, "page_size": P}},
     "costmodel": {"<device>|<model>[|shared-prefix]": CostModel JSON},
     "gamma": {"<group>|<mode>": {"sweep_geomean_speedup": {γ: ...}, "measured_best": γ, "costmodel_best": γ, ...}},
     "decisions": [{group, mode, ctx, batch, α, γ*, predicted speedup vs int8/bf16, speculate}]}

A row is keyed by (device, model, mode, gamma, ctx, batch, shared_prefix); a later run replaces it. Derived on every write:
``baseline_tok_per_s``/``speedup`` (vs the bf16 row of the same cell), ``speedup_vs_int8``, the same from the server's
own log (``log_baseline_tok_per_s``/``log_speedup``/``log_speedup_vs_int8``: see ``log_speedups``), the per-step time
(``t_step_ms``: a plain step, or a speculation round), α (from τ and γ), the fitted cost model, and each row's
``predicted_speedup`` from a fit that leaves that row out (so predicted vs measured is an out-of-sample check).
"""
from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import common

REPO = Path(__file__).resolve().parent.parent
try:
    import sgl_spec.speculative.cost_model as cm
except ImportError:  # not installed: the repo itself (appended, so PyPI's `kernels` is never shadowed)
    sys.path.append(str(REPO))
    import sgl_spec.speculative.cost_model as cm

# a row per server configuration: simulated acceptance, draft weights and prefill engine are part of it
KEY = ("device", "model", "mode", "gamma", "ctx", "batch", "shared_prefix", "alpha_sim", "draft_weights",
       "prefill_engine")
CELL = ("device", "model", "ctx", "batch", "shared_prefix")  # rows of one cell compare with each other
# spec-auto mixes rounds and plain steps: no step kind, never fitted
KIND = {"bf16": "ar_bf16", "int8": "ar_int8", "spec-dense": "round", "spec-topk": "round", "spec-auto": None}


def row_key(r: dict, keys=KEY) -> tuple:
    return tuple(bool(r.get(k)) if k == "shared_prefix" else r.get(k) for k in keys)


def load(path) -> dict:
    return common.load_json(path) or {"meta": {}, "runs": [], "rows": []}


def save(doc: dict, path) -> None:
    common.write_json(path, doc)


def upsert(doc: dict, row: dict) -> None:
    k = row_key(row)
    doc["rows"] = [r for r in doc["rows"] if row_key(r) != k] + [row]


def done(doc: dict, row: dict) -> bool:
    return any(row_key(r) == row_key(row) and r.get("status") == "ok" for r in doc["rows"])


# ---- derived fields --------------------------------------------------------------------------------------------------
def _observation(r: dict):
    kind = KIND.get(r["mode"])
    if kind is None or r.get("status") != "ok" or not r.get("t_step_ms"):
        return None
    o = {"kind": kind, "batch": r["batch"], "kv_tokens": r["batch"] * r.get("ctx_mid_window", r["ctx"]),
         "t_s": r["t_step_ms"] / 1e3, "key": row_key(r)}
    if kind == "round":
        o.update(gamma=r["gamma"], dense=r["mode"] == "spec-dense")
    return o


def _step_ms(r: dict):
    if r.get("status") != "ok" or not r.get("tok_per_s"):
        return None
    per_step_tokens = r["batch"] * (r.get("accept_length") or 1.0) if KIND.get(r["mode"]) == "round" else r["batch"]
    return 1e3 * per_step_tokens / r["tok_per_s"]


MIN_FIT_ROWS = {"ar_bf16": 3, "ar_int8": 3, "round": 4}


def _predict(model, r: dict):
    """Model speedup of row ``r`` over the bf16 step of its cell, at the row's own measured α; None unless both
    step kinds involved were fitted on enough rows (a prior-only prediction is no check of anything)."""
    kind = KIND[r["mode"]]
    if kind == "ar_bf16" or any(model.fit_info.get(k, {}).get("n", 0) < MIN_FIT_ROWS[k] for k in ("ar_bf16", kind)):
        return None
    b, kv = r["batch"], r["batch"] * r.get("ctx_mid_window", r["ctx"])
    t_bf16 = model.step_time("ar_bf16", b, kv)
    if kind == "round":
        if r.get("alpha") is None:
            return None
        m = cm.CostModel(model.shape, model.steps, replace(model.draft, dense=r["mode"] == "spec-dense"))
        return cm.expected_tokens(r["alpha"], r["gamma"]) * t_bf16 / m.round_time(b, kv, r["gamma"])
    return t_bf16 / model.step_time(kind, b, kv)


def log_speedups(rows: list) -> None:
    """``log_speedup`` = the row's steady-state rate from SGLang's own "gen throughput" log lines over the bf16 row's of
    the same cell (``log_speedup_vs_int8`` likewise); None where either has no such rate. The primary speedup: the
    issue defines the stock baseline from the server log, and the streaming client undercounts at high rates, more for
    one-token-per-event modes (bf16, int8) than for speculation (about τ tokens per event)."""
    def rate(x):
        return x.get("log_tok_per_s") if x and x.get("status") == "ok" else None

    by_cell = {}
    for x in rows:
        if rate(x) and x["mode"] in ("bf16", "int8"):
            by_cell[(x["mode"],) + row_key(x, CELL)] = x
    for r in rows:
        if r.get("status") != "ok":
            continue
        base, int8 = (by_cell.get((m,) + row_key(r, CELL)) for m in ("bf16", "int8"))
        r["log_baseline_tok_per_s"] = rate(base)
        r["log_speedup"] = rate(r) / rate(base) if rate(r) and base else None
        r["log_speedup_vs_int8"] = rate(r) / rate(int8) if rate(r) and int8 else None


def group_name(device: str, model: str, shared_prefix=False) -> str:
    return f"{device}|{model}" + ("|shared-prefix" if shared_prefix else "")


def derive(doc: dict, model_cfgs: dict, fit: bool = True) -> None:
    """Recompute every derived field. ``model_cfgs``: model name -> (HF config dict, page size), remembered in the
    document (``models``) so rows of models from earlier runs keep their fits. ``fit=False`` skips the cost-model
    fits (one leave-one-out fit per row: too slow to repeat after every configuration)."""
    known = doc.setdefault("models", {})
    known.update({name: {"config": c, "page_size": p} for name, (c, p) in model_cfgs.items()})
    rows = doc["rows"]
    cell = lambda r, mode: next((x for x in rows if x.get("status") == "ok" and x["mode"] == mode and  # noqa: E731
                                 row_key(x, CELL) == row_key(r, CELL)), None)
    for r in rows:
        if r.get("status") != "ok":
            continue
        r["t_step_ms"] = _step_ms(r)
        if KIND.get(r["mode"]) == "round" and r.get("accept_length"):
            r["alpha"] = cm.alpha_from_tokens(r["accept_length"], r["gamma"])
        base, int8 = cell(r, "bf16"), cell(r, "int8")
        r["baseline_tok_per_s"] = base["tok_per_s"] if base else None
        r["speedup"] = r["tok_per_s"] / base["tok_per_s"] if base else None
        r["speedup_vs_int8"] = r["tok_per_s"] / int8["tok_per_s"] if int8 else None
    log_speedups(rows)
    if not fit:
        return
    doc["costmodel"], doc["decisions"] = {}, []
    groups = {}
    for r in rows:
        if r["model"] in known:
            groups.setdefault(group_name(r["device"], r["model"], r.get("shared_prefix")), []).append(r)
    for name, grp in groups.items():
        model = grp[0]["model"]
        shape = cm.ModelShape.from_hf_config(known[model]["config"], page_size=known[model]["page_size"])
        prior = cm.default_cost_model(shape, grp[0]["device"])
        obs = [o for o in map(_observation, grp) if o]
        if not obs:
            continue
        full = cm.fit(obs, shape, prior=prior, source=f"fitted:{name}")
        doc["costmodel"][name] = full.to_json()
        for r in grp:
            o = _observation(r)
            if o is None:
                continue
            loo = cm.fit([x for x in obs if x["key"] != o["key"]], shape, prior=prior)
            r["predicted_speedup"] = _predict(loo, r)
            r["predicted_speedup_insample"] = _predict(full, r)
        _gamma_and_decisions(doc, name, grp, full)


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _gamma_and_decisions(doc, name, grp, full) -> None:
    gam = doc.setdefault("gamma", {})
    for mode in ("spec-dense", "spec-topk"):
        ok = [r for r in grp if r["mode"] == mode and r.get("status") == "ok" and r.get("speedup")]
        if not ok:
            continue
        cells_by_g = {}
        for r in ok:
            cells_by_g.setdefault(r["gamma"], {})[(r["ctx"], r["batch"])] = r["speedup"]
        common = set.intersection(*(set(c) for c in cells_by_g.values()))
        sweep = {g: _geomean([c[k] for k in common]) for g, c in cells_by_g.items()}
        alphas = sorted(r["alpha"] for r in ok if r.get("alpha") is not None)
        alpha = alphas[len(alphas) // 2] if alphas else 0.6
        m = cm.CostModel(full.shape, full.steps, replace(full.draft, dense=mode == "spec-dense"))
        cells = sorted({(r["ctx"], r["batch"]) for r in grp if r.get("status") == "ok"})
        model_g = max(cm.GAMMAS, key=lambda g: _geomean(
            [m.speedup(b, b * ctx, g, alpha, "ar_bf16") for ctx, b in cells]) or 0)
        gam[f"{name}|{mode}"] = {
            "sweep_geomean_speedup": sweep, "common_cells": len(common), "alpha_median": alpha,
            "measured_best": max(sweep, key=lambda g: sweep[g] or 0) if any(sweep.values()) else None,
            "costmodel_best": model_g, "costmodel_fitted": sorted(full.fit_info)}
        for ctx, b in cells:
            g_star, s_int8 = m.best_gamma(b, b * ctx, alpha)
            doc["decisions"].append({
                "group": name, "mode": mode, "ctx": ctx, "batch": b, "alpha": alpha,
                "gamma_star": g_star, "pred_speedup_vs_int8": s_int8,
                "pred_speedup_vs_bf16": m.speedup(b, b * ctx, g_star, alpha, "ar_bf16"),
                "speculate": m.should_speculate(b, b * ctx, alpha, g_star)})
