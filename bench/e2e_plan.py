"""bench_e2e.py's time plan: how long each server of a run takes, and how to split a grid into GPU calls that fit.

A GPU call is limited (10 minutes; bench_e2e.py's --budget-s defaults to 540 s), so a grid runs as several
invocations appending to one bench/results/e2e.json (rows already there are skipped, so re-running a command after a
timeout continues where it stopped). ``chunks`` packs each (mode, γ) server's batch sizes into invocations whose
estimate fits ``fill`` x the budget; ``--plan`` prints them as commands, in order, with their estimates.

Estimate of one server = start (+ warmup) + Σ over its configurations of (prefill of b·ctx prompt tokens at the mode's
prefill rate + gen decode steps + a fixed per-configuration overhead). Rates come from the rows already in e2e.json
(``prefill_done_s``, ``server_startup_s``, ``window_s``) when there are any for that kind of mode, else from the guesses
in ``DEFAULTS`` (labelled "guess" in the printout: run the calibration chunk first, then re-plan).
"""
from __future__ import annotations

import shlex
import statistics

import e2e_results

# Guesses for pycode-30m on one H100/H200, before anything is measured: SGLang's own prefill (fa3) is fast; quantspec's
# prefill attention is the pure-torch reference (sgl_spec/kvcache/prefill.py), much slower; a quantspec start compiles the
# Triton kernels and captures the verify-width CUDA graphs.
DEFAULTS = {
    "stock": {"prefill_tok_s": 250e3, "startup_s": 60.0, "step_s": 2.5e-3},
    "quant": {"prefill_tok_s": 25e3, "startup_s": 100.0, "step_s": 5e-3},
}
CONFIG_OVERHEAD_S = 4.0  # flush, client processes, HTTP, log scan
WARMUP_S = 20.0  # first-use compilations and the warmup requests


def family(mode: str) -> str:
    return "stock" if mode == "bf16" else "quant"


def rates(doc: dict, device=None, model=None) -> dict:
    """Per family: measured rates from e2e.json rows (median), or the DEFAULTS guess; ``source`` says which."""
    out = {}
    for fam, guess in DEFAULTS.items():
        rows = [r for r in doc.get("rows", []) if r.get("status") == "ok" and family(r["mode"]) == fam
                and not r.get("shared_prefix") and (device is None or r["device"] == device)
                and (model is None or r["model"] == model)]
        pre = [r["batch"] * r["ctx"] / r["prefill_done_s"] for r in rows if r.get("prefill_done_s")]
        start = [r["server_startup_s"] for r in rows if r.get("server_startup_s")]
        steps = [r["window_s"] / max(r["window_tokens_per_req"] / (r.get("accept_length") or 1.0), 1.0)
                 for r in rows if r.get("window_s") and r.get("window_tokens_per_req")]
        out[fam] = {
            "prefill_tok_s": statistics.median(pre) if pre else guess["prefill_tok_s"],
            "startup_s": max(start) + 10.0 if start else guess["startup_s"],
            "step_s": max(steps) if steps else guess["step_s"],
            "source": f"measured ({len(rows)} rows)" if pre else "guess",
        }
    return out


def config_s(rate: dict, ctx: int, b: int, gen: int, shared_prefix: bool = False) -> float:
    prompt = (ctx + 64 * b) if shared_prefix else b * ctx
    return prompt / rate["prefill_tok_s"] + gen * rate["step_s"] + CONFIG_OVERHEAD_S


def server_s(rate: dict, cells, gen: int, shared_prefix: bool = False) -> float:
    if not cells:
        return 0.0
    return rate["startup_s"] + WARMUP_S + sum(config_s(rate, c, b, gen, shared_prefix) for c, b in cells)


def chunks(servers, ctxs, batches, gen, rate_of, budget_s: float, fill: float = 0.8, shared_prefix=False,
           done=lambda mode, gamma, ctx, b: False):
    """``servers``: [(mode, γ)]. Returns [(mode, γ, [batch sizes], estimate_s)]: per server, its batch sizes (all
    contexts each) packed in ascending order into invocations estimated at <= fill * budget_s. A batch size whose
    configurations alone exceed that gets an invocation of its own (flagged by the estimate)."""
    out = []
    for mode, gamma in servers:
        rate = rate_of(mode)
        group, cells = [], []
        for b in sorted(batches):
            new = [(c, b) for c in ctxs if not done(mode, gamma, c, b)]
            if not new:
                continue
            if group and server_s(rate, cells + new, gen, shared_prefix) > fill * budget_s:
                out.append((mode, gamma, group, server_s(rate, cells, gen, shared_prefix)))
                group, cells = [], []
            group.append(b)
            cells += new
        if group:
            out.append((mode, gamma, group, server_s(rate, cells, gen, shared_prefix)))
    return out


def command(base_args: list[str], mode: str, gamma: int, batches, ctxs, gen: int, budget_s: float) -> str:
    args = ["python3", "bench/bench_e2e.py", *base_args, "--modes", mode, "--ctx", ",".join(map(str, ctxs)),
            "--batch", ",".join(map(str, batches)), "--gen", str(gen), "--budget-s", str(int(budget_s)), "--no-plot"]
    if gamma:
        args += ["--gammas", str(gamma)]
    return " ".join(shlex.quote(x) for x in args)


def show(a, doc, device, model, servers, row_base, only_estimate=False) -> float:
    """bench_e2e.py's printout: each server's estimate and, unless ``only_estimate``, the invocations that cover what the
    JSON does not have yet, each estimated within 80% of --budget-s. Returns the estimated seconds of this run."""
    rate = rates(doc, device if only_estimate else None, model)
    for fam, r in rate.items():
        print(f"[e2e] plan rates {fam}: prefill {r['prefill_tok_s'] / 1e3:.0f}k tok/s, server start "
              f"{r['startup_s']:.0f} s, decode step {1e3 * r['step_s']:.1f} ms ({r['source']})", flush=True)
    done = lambda mode, g, c, b: not a.redo and e2e_results.done(  # noqa: E731
        doc, row_base(a, device, model, mode, g, c, b))
    rate_of = lambda mode: rate[family(mode)]  # noqa: E731
    if only_estimate:
        total = 0.0
        for mode, g in servers:
            cells = [(c, b) for c in a.ctx for b in a.batch if not done(mode, g, c, b)]
            est = server_s(rate_of(mode), cells, a.gen, a.shared_prefix)
            total += est
            print(f"[e2e] plan {mode} γ={g}: {len(cells)} configurations, ~{est:.0f} s", flush=True)
        flag = "" if total <= a.budget_s else f" > budget {a.budget_s:.0f} s: the rest is skipped, rerun to continue"
        print(f"[e2e] plan total ~{total:.0f} s{flag}", flush=True)
        return total
    base = ["--model", a.model] if a.model else []
    base += ["--shared-prefix"] if a.shared_prefix else []
    base += ["--extra", a.extra] if a.extra else []
    base += ["--out", "$OUT", "--continue-from", "bench/results/e2e.json"]
    parts = chunks(servers, a.ctx, a.batch, a.gen, rate_of, a.budget_s, shared_prefix=a.shared_prefix,
                            done=done)
    for i, (mode, g, batches, est) in enumerate(parts, 1):
        cmd = command(base, mode, g, batches, a.ctx, a.gen, a.budget_s).replace("'$OUT'", "$OUT")
        print(f"# {i}/{len(parts)}: {mode} γ={g} batch {batches}: ~{est:.0f} s", flush=True)
        print(cmd, flush=True)
    total = sum(p[3] for p in parts)
    print(f"[e2e] plan: {len(parts)} invocations, ~{total / 60:.1f} min of GPU time in all", flush=True)
    return total
