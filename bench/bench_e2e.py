#!/usr/bin/env python
"""End-to-end decode benchmark: quantspec against stock SGLang, the real server per (mode, γ), driven over HTTP.

Per server, for every (ctx, batch) of the grid: ``batch`` requests with distinct ``ctx``-token prompts start at once
(greedy, ignore_eos, ``--gen`` new tokens); the decode window runs from "all prefills done" to "first request
finished" (bench/e2e_client.py). One printed line and one JSON row per configuration; <out>/e2e.json is rewritten
after each (merged with earlier runs: a rerun continues where the last one stopped, ``--redo`` repeats).

Modes (bench/e2e_server.py): bf16 (stock SGLang, default backend), int8 (``--attention-backend quantspec``),
spec-dense (``--spec-algo quantspec --quantspec-dense-draft``) and spec-topk (``--spec-algo quantspec``), both with
``--quantspec-speculate always`` (speculation every step), and spec-auto (``--spec-algo quantspec`` alone: the default
server, auto-off included). ``--gammas`` applies to the spec modes; ``auto`` takes each mode's best γ of the sweeps
already in the JSON (spec-auto: spec-topk's; else the cost model's).

Speedups are decode tokens/s over the bf16 row of the same cell, from the server's own "gen throughput" log lines
(``log_speedup``, primary) and from the client's count of streamed tokens (``speedup``). The cost model fitted to the
rows is written as <out>/costmodel_<model>.json (``--quantspec-cost-model`` takes it as auto mode's starting point).
``--budget-s`` starts no server or configuration that would not finish in time (the rest is recorded as skipped;
rerun the same command to continue).

Models: NAME=PATH (real weights, Python prompts from the standard library) or a built-in config-only model with
``--load-format dummy`` and random prompts (llama3-8b-dummy: step costs only; random weights accept every draft, so
its acceptance is flagged meaningless; bench/make_dummy_model.py writes its folder for a hand-launched server).

  python bench/bench_e2e.py --model pycode-30m=/path/to/pycode-30m                  # the default grid (GPU)
  python bench/bench_e2e.py --model pycode-30m=/path/to/pycode-30m --modes spec-topk --gammas 2,4,6   # γ sweep
  python bench/bench_e2e.py --model llama3-8b-dummy --modes bf16,int8,spec-topk --shared-prefix      # step costs
  python bench/plot_e2e.py bench/results/e2e.json                                    # PNGs (CPU is fine)
  python bench/performance_doc.py --write                                           # docs/PERFORMANCE.md
  python bench/bench_e2e.py --smoke     # CPU: tiny random Llama, bf16 + spec-topk (γ=2) x 4 configurations (~2 min)
"""
from __future__ import annotations

import argparse
import math
import os
import shlex
import time
from pathlib import Path

import common
import e2e_client
import e2e_results
import e2e_server
from e2e_setup import REPO, setup

T0 = time.monotonic()  # --budget-s counts from process start
TAIL = 64  # --shared-prefix: distinct last tokens per request (a whole page at every page size we use)


def parse_args(argv=None):
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="NAME=PATH (real weights) or a built-in dummy: llama3-8b-dummy, qwen3-8b-dummy, tiny-dummy "
                                    "(default pycode-30m=../shared/models/pycode-30m)")
    ap.add_argument("--modes", help=",".join(e2e_server.MODES) + " (default bf16,int8,spec-dense,spec-topk; "
                                    "--smoke: bf16,spec-topk)")
    ap.add_argument("--gammas", help="γ list for the spec modes, or 'auto' (default 4; --smoke: 2)")
    ap.add_argument("--ctx", type=ints, help="prompt lengths (default 4096,8192,15360; 8B dummies 32768,65536)")
    ap.add_argument("--batch", type=ints, help="concurrent requests (default 1,8,32,64,128; 8B dummies 1,4,8)")
    ap.add_argument("--gen", type=int, help="new tokens per request (default 512; 8B dummies 256)")
    ap.add_argument("--skip", type=int, default=8, help="decode tokens per request before the window opens")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--shared-prefix", action="store_true",
                    help="requests share all but their last 64 prompt tokens (primed into the radix cache first): "
                         "prefill once per configuration instead of per request, for long-context step costs; "
                         "attention still reads every page per request, but L2 may serve shared pages (optimistic)")
    ap.add_argument("--mem-fraction", type=float, default=0.85)
    ap.add_argument("--chunk", type=int, help="chunked prefill size (default 16384; 8B dummies 8192)")
    ap.add_argument("--extra", default="", help="more server arguments, one shell-quoted string")
    ap.add_argument("--spec-extra", default="", help=(
        "more arguments for the quantspec servers only (e.g. '--quantspec-draft-weights model'; stock SGLang "
        "refuses them), one shell-quoted string"))
    ap.add_argument("--simulate-accept", type=float, default=None, help=(
        "random-weight models: keep each greedy draft with this probability (SGL_SPEC_SIMULATE_ACCEPT in the "
        "servers' environment); rows record it as alpha_sim and kind e2e_sim"))
    ap.add_argument("--procs", type=int, default=8, help="client processes at most (16 requests each)")
    ap.add_argument("--site", default="/tmp/site", help="GPU: an offline SGLang install put first on the server's "
                                                         "path, if the folder exists")
    ap.add_argument("--no-overlay", action="store_true",
                    help="GPU: use the installed sgl-spec instead of this working tree (overlay)")
    ap.add_argument("--budget-s", "--time-budget-s", type=float, default=float("inf"),
                    help="start no server/configuration that would not finish within this many seconds")
    ap.add_argument("--out", help="results folder (default bench/results; --smoke: /tmp/sgl_spec_e2e_smoke)")
    ap.add_argument("--log-dir", help="server logs (default <out>/e2e_logs)")
    ap.add_argument("--continue-from", help="start from this e2e.json when <out>/e2e.json does not exist yet")
    ap.add_argument("--redo", action="store_true", help="rerun configurations the JSON already has")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="CPU: tiny random Llama, bf16 + spec-topk, 4 configs")
    a = ap.parse_args(argv)
    a.modes = (a.modes or ("bf16,spec-topk" if a.smoke else "bf16,int8,spec-dense,spec-topk")).split(",")
    a.gammas = a.gammas or ("2" if a.smoke else "4")
    bad = set(a.modes) - set(e2e_server.MODES)
    if bad:
        ap.error(f"unknown --modes {sorted(bad)}")
    a.device = "cpu" if a.smoke else "cuda"
    big = a.model in ("llama3-8b-dummy", "qwen3-8b-dummy")
    if a.smoke:
        a.ctx, a.batch, a.gen = a.ctx or [96, 200], a.batch or [1, 3], a.gen or 24
        a.skip = min(a.skip, 2)
    a.ctx = a.ctx or ([32768, 65536] if big else [4096, 8192, 15360])
    a.batch = a.batch or ([1, 4, 8] if big else [1, 8, 32, 64, 128])
    a.gen = a.gen or (256 if big else 512)
    a.chunk = a.chunk or (8192 if big else 16384)
    a.out = Path(a.out or ("/tmp/sgl_spec_e2e_smoke" if a.smoke else REPO / "bench" / "results"))
    a.log_dir = Path(a.log_dir or a.out / "e2e_logs")
    return a


def plan(a, doc, device, model) -> list[tuple[str, int]]:
    """(mode, γ) per server, in order; γ = 0 for the non-speculative modes."""
    out = []
    for mode in a.modes:
        if not e2e_server.MODES[mode]["spec"]:
            out.append((mode, 0))
            continue
        if a.gammas == "auto":
            name = e2e_results.group_name(device, model, a.shared_prefix)
            swept = "spec-topk" if mode == "spec-auto" else mode  # the default server drafts top-k pages
            g = doc.get("gamma", {}).get(f"{name}|{swept}", {})
            out.append((mode, int(g.get("measured_best") or g.get("costmodel_best") or 4)))
        else:
            out += [(mode, int(x)) for x in a.gammas.split(",")]
    return out


class Clock:
    """Budget bookkeeping: how long a server start and a configuration take, learnt as the run goes."""

    def __init__(self, budget_s, device):
        self.budget = budget_s
        self.startup = 45.0 if device == "cpu" else 150.0
        self.rate = None  # seconds per (batch × (ctx + gen)) of the configurations run so far (max)

    def left(self):
        return self.budget - (time.monotonic() - T0)

    def est_config(self, b, ctx, gen):
        base = 10.0 if self.rate is None else self.rate * b * (ctx + gen)
        return 1.5 * base + 5.0

    def learn(self, b, ctx, gen, seconds):
        r = seconds / (b * (ctx + gen))
        self.rate = r if self.rate is None else max(self.rate, r)


def _row_base(a, device, model, mode, gamma, ctx, b):
    sim = a.simulate_accept is not None and e2e_server.MODES[mode]["spec"]
    return {"kind": "e2e_sim" if sim else "e2e", "device": device, "model": model, "mode": mode, "gamma": gamma,
            "ctx": ctx, "batch": b, "gen": a.gen, "temperature": a.temperature, "shared_prefix": a.shared_prefix,
            "alpha_sim": a.simulate_accept if sim else None,
            "draft_weights": e2e_server.flag_value(shlex.split(a.extra) + shlex.split(a.spec_extra),
                                                   "--quantspec-draft-weights", "auto")
            if e2e_server.MODES[mode]["spec"] else None,
            "prefill_engine": e2e_server.prefill_engine() if mode != "bf16" else None}


def server_args(a, ctx_info, mode, gamma, max_b, max_ctx, mem_fraction) -> list[str]:
    """The launch arguments of one mode's server for a grid up to ``max_b`` requests of ``max_ctx`` tokens."""
    dummy, max_pos = ctx_info[3], ctx_info[4].get("max_position_embeddings")
    if a.device == "cpu":
        args = e2e_server.cpu_args(max_ctx=max_ctx, gen=a.gen, gamma=gamma, max_batch=max_b, dummy=dummy,
                                   quant=e2e_server.MODES[mode]["quant"], max_pos=max_pos)
        if mode == "spec-topk":
            args += ["--quantspec-min-pages", "1"]
    else:
        args = e2e_server.gpu_args(max_ctx=max_ctx, gen=a.gen, gamma=gamma, max_batch=max_b, dummy=dummy,
                                   chunk=a.chunk, mem_fraction=mem_fraction, max_pos=max_pos)
    spec_extra = shlex.split(a.spec_extra) if e2e_server.MODES[mode]["quant"] else []
    return args + e2e_server.mode_args(mode, gamma) + shlex.split(a.extra) + spec_extra


def common_fields(a, ctx_info, srv, mode, args) -> dict:
    """The fields every row measured on ``srv`` shares (version, pool, KV bytes per token)."""
    cfg, page, dummy = ctx_info[4], ctx_info[5], ctx_info[3]
    info = srv.info()
    kv = e2e_server.kv_bytes_from_log(srv.log_since(0))
    quant, spec = e2e_server.MODES[mode]["quant"], e2e_server.MODES[mode]["spec"]
    return {"sglang": info.get("version"), "server_startup_s": srv.startup_s,
            "max_total_num_tokens": info.get("max_total_num_tokens"), "server_args": args,
            "kv_bytes_per_token": e2e_server.kv_bytes_formula(cfg, quant, page, 4 if a.smoke else 2), **kv,
            "acceptance_meaningful": spec and not dummy}


def capacity_shortfall(a, ctx_info, row) -> str:
    """Why the server's KV pool cannot hold the row's batch (empty when it can)."""
    page_eff = ctx_info[5] if e2e_server.MODES[row["mode"]]["quant"] else 1
    cap = row.get("max_total_num_tokens") or 0
    own = TAIL if a.shared_prefix else row["ctx"]
    need = row["batch"] * (own + a.gen + row["gamma"] + 1 + page_eff) + (row["ctx"] - own)
    return f"KV capacity: needs {need} of {cap}" if cap and need > 0.95 * cap else ""


def cell_blocker(a, ctx_info, clock, srv, row):
    """Why the row's cell is not measured on ``srv`` now: (status fields, whether the server's later cells stop too),
    or (None, False) when it can be. """
    short = capacity_shortfall(a, ctx_info, row)
    if short:
        return {"status": "skipped", "reason": short}, False
    if clock.left() < clock.est_config(row["batch"], row["ctx"], a.gen) + 5:
        return {"status": "skipped", "reason": "budget"}, True
    if not srv.alive():
        return {"status": "failed", "reason": "server died",
                "log_tail": srv.log_since(max(0, srv.log_size() - 4000))}, True
    return None, False


def run_server(a, doc, clock, ctx_info, mode, gamma):
    device, model, path, _, _, _, prompts_for = ctx_info
    todo = [(ctx, b) for ctx in a.ctx for b in a.batch
            if a.redo or not e2e_results.done(doc, _row_base(a, device, model, mode, gamma, ctx, b))]
    if not todo:
        print(f"[e2e] {mode} γ={gamma}: all configurations already in the JSON (--redo repeats them)", flush=True)
        return
    first = clock.est_config(todo[0][1], todo[0][0], a.gen)
    if clock.left() < clock.startup + first:
        return _skip_all(a, doc, todo, device, model, mode, gamma, "budget (server start)")
    max_b, max_ctx = max(b for _, b in todo), max(c for c, _ in todo)
    args = server_args(a, ctx_info, mode, gamma, max_b, max_ctx, a.mem_fraction)
    try:
        with e2e_server.launch(args, device=a.device, log_dir=a.log_dir / model, model_dir=path,
                               timeout=max(60.0, min(900.0, clock.left() - 30)), site=a.site,
                               overlay=not a.no_overlay) as srv:
            clock.startup = max(clock.startup, srv.startup_s + 10)
            common = common_fields(a, ctx_info, srv, mode, args)
            _warmup(srv, prompts_for, a, max_ctx, gamma)
            for i, (ctx, b) in enumerate(todo):
                row = {**_row_base(a, device, model, mode, gamma, ctx, b), **common}
                block, stop = cell_blocker(a, ctx_info, clock, srv, row)
                if block is None:
                    _record(a, doc, _measure(a, srv, clock, row, prompts_for, prompts_for(ctx, b)))
                elif not stop:
                    _record(a, doc, {**row, **block})
                else:
                    _skip_all(a, doc, todo[i:], device, model, mode, gamma, block["reason"], status=block["status"],
                              tail=block.get("log_tail"))
                    return
    except Exception as exc:  # a server that does not start fails its configurations, not the benchmark
        left = [(c, b) for c, b in todo if not e2e_results.done(doc, _row_base(a, device, model, mode, gamma, c, b))]
        _skip_all(a, doc, left, device, model, mode, gamma, f"{type(exc).__name__}: {str(exc)[-3000:]}",
                  status="failed")


def warmup_waves(batches, ctxs, max_ctx) -> list[tuple[int, int]]:
    """(ctx, requests) of the unrecorded waves before a server's first cell: every batch size of the grid at the
    shortest context (kernels and graphs are chosen per batch size: a first use at 8 requests once stalled a
    measured window for 2 s), and a few requests at the longest."""
    lo = min(ctxs)
    waves = [(lo, b) for b in sorted(set(batches))]
    if max_ctx != lo:
        waves.append((max_ctx, min(4, max(batches))))
    return waves


def _warmup(srv, prompts_for, a, max_ctx, gamma):
    """First-use compilations (Triton kernels, eager draft paths) happen here, not in a measured window."""
    for ctx, n in warmup_waves(a.batch, a.ctx, max_ctx):
        prompts = _prepare(a, srv, prompts_for, ctx, prompts_for(ctx, n, seed_extra=7))
        e2e_client.run_batch(srv.url, prompts, max_new_tokens=2 * gamma + 16, temperature=a.temperature,
                             timeout=900, procs=max(1, min(a.procs, math.ceil(n / 16))), lead_s=0.1)
    if not a.shared_prefix:
        srv.flush_cache()


def _prepare(a, srv, prompts_for, ctx, prompts):
    """--shared-prefix: each prompt becomes the context's shared head + its own last TAIL tokens, and the head is
    primed into the radix cache (a cache hit after the first time: the head depends on ctx only)."""
    if not a.shared_prefix or ctx <= TAIL:
        return prompts
    head = prompts_for(ctx, 1, seed_extra=99)[0][: ctx - TAIL]
    e2e_client.run_batch(srv.url, [head], max_new_tokens=1, timeout=900, lead_s=0.0)
    return [head + p[-TAIL:] for p in prompts]


def _measure(a, srv, clock, row, prompts_for, prompts):
    t_start = time.monotonic()
    if not a.shared_prefix:
        srv.flush_cache()  # nothing cached from the previous configuration
    prompts = _prepare(a, srv, prompts_for, row["ctx"], prompts)
    offset = srv.log_size()
    procs = 1 if a.device == "cpu" else max(1, min(a.procs, math.ceil(row["batch"] / 16)))
    traces = e2e_client.run_batch(srv.url, prompts, max_new_tokens=a.gen, temperature=a.temperature,
                                  timeout=max(30.0, min(600.0, clock.left() - 15)), procs=procs)
    m = e2e_client.window_metrics(traces, skip=a.skip)
    text = srv.log_since(offset)
    log = {**e2e_server.steady_log_throughput(text, row["batch"]), **e2e_server.steady_round_phases(text, row["batch"]),
           "serving_compiles": e2e_server.serving_compiles(text)}
    wall = time.monotonic() - t_start
    clock.learn(row["batch"], row["ctx"], a.gen, wall)
    out = {**row, **m, **log, "wall_s": wall, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    if m.get("status") == "ok":
        out["ctx_mid_window"] = row["ctx"] + m["generated_mid_window"]
        if not row["acceptance_meaningful"]:
            out["accept_length_note"] = "random weights or no speculation: not an acceptance claim"
    return out


def _skip_all(a, doc, todo, device, model, mode, gamma, reason, status="skipped", tail=None):
    for ctx, b in todo:
        row = {**_row_base(a, device, model, mode, gamma, ctx, b), "status": status, "reason": reason}
        if tail:
            row["log_tail"] = tail
        _record(a, doc, row)


def _record(a, doc, row):
    if row.get("status") != "ok" and e2e_results.done(doc, row):
        return  # never replace a measurement with a skip
    e2e_results.upsert(doc, row)
    e2e_results.derive(doc, a.model_cfgs, fit=False)
    e2e_results.save(doc, a.out / "e2e.json")
    r = next(x for x in doc["rows"] if e2e_results.row_key(x) == e2e_results.row_key(row))
    f = lambda k, spec: "-" if r.get(k) is None else format(r[k], spec)  # noqa: E731
    if r["status"] == "ok":
        print(f"[e2e] {r['model']} {r['mode']:<10} γ={r['gamma']} ctx={r['ctx']:>6} b={r['batch']:>3}  "
              f"tok/s {f('tok_per_s', '9.1f')} (log {f('log_tok_per_s', '.1f')})  x{f('speedup', '.2f')} vs bf16  "
              f"τ {f('accept_length', '.2f')}  itl p50/p90 "
              f"{f('itl_p50_ms', '.2f')}/{f('itl_p90_ms', '.2f')} ms  step {f('t_step_ms', '.2f')} ms  "
              f"kv {f('kv_bytes_per_token', '.0f')} B/tok  window {f('window_s', '.2f')} s", flush=True)
        print(f"[e2e]   cell {f('cell_s', '.2f')} s: prefill done {f('prefill_done_s', '.2f')}, window "
              f"{f('decode_start_s', '.2f')}-{f('first_done_s', '.2f')}, tail {f('tail_s', '.2f')} s; longest pause "
              f"{f('max_gap_s', '.3f')} s at {f('max_gap_at_s', '.2f')} s; τ per request "
              f"{f('accept_length_min', '.2f')}-{f('accept_length_max', '.2f')} (done last: "
              f"{f('last_done_accept_length', '.2f')}); serving-time compilations "
              f"{r.get('serving_compiles') or 'none'}", flush=True)
    else:
        print(f"[e2e] {r['model']} {r['mode']:<10} γ={r['gamma']} ctx={r['ctx']:>6} b={r['batch']:>3}  "
              f"{r['status'].upper()}: {str(r.get('reason'))[:300]}", flush=True)


def _summary(doc, device, model):
    """Measured vs predicted (leave-one-out cost model) speedup over bf16, every measured row of this model."""
    rows = sorted((r for r in doc["rows"] if r["device"] == device and r["model"] == model and r.get("status") == "ok"
                   and r["mode"] != "bf16"), key=lambda r: (r["mode"], r["gamma"], r["ctx"], r["batch"]))
    f = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    for r in rows:
        print(f"[e2e] summary {r['mode']:<10} γ={r['gamma']} ctx={r['ctx']:>6} b={r['batch']:>3}  speedup "
              f"{f(r.get('speedup'))} predicted {f(r.get('predicted_speedup'))}  vs int8 {f(r.get('speedup_vs_int8'))}"
              f"  α {f(r.get('alpha'))}", flush=True)


def main(argv=None):
    a = parse_args(argv)
    if a.simulate_accept is not None:  # the servers inherit this environment (bench/common.py gpu_env)
        os.environ[e2e_server.SIMULATE_ENV] = str(a.simulate_accept)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.continue_from and not (a.out / "e2e.json").exists() and Path(a.continue_from).exists():
        e2e_results.save(e2e_results.load(a.continue_from), a.out / "e2e.json")
    ctx_info, meta = setup(a)
    device, model, path, dummy = ctx_info[:4]
    doc = e2e_results.load(a.out / "e2e.json")
    doc["meta"] = meta
    doc.setdefault("runs", []).append(meta)
    clock = Clock(a.budget_s, a.device)
    print(f"[e2e] {device}, model {model} ({'dummy weights' if dummy else path}), grid ctx {a.ctx} x batch "
          f"{a.batch}, gen {a.gen}, budget {a.budget_s:.0f} s", flush=True)
    servers = plan(a, doc, device, model)
    for mode, gamma in servers:
        run_server(a, doc, clock, ctx_info, mode, gamma)
        e2e_results.derive(doc, a.model_cfgs)
        e2e_results.save(doc, a.out / "e2e.json")
    e2e_results.derive(doc, a.model_cfgs)
    e2e_results.save(doc, a.out / "e2e.json")
    _summary(doc, device, model)
    for key, g in doc.get("gamma", {}).items():
        print(f"[e2e] γ {key}: sweep {g['sweep_geomean_speedup']} measured best {g['measured_best']}, "
              f"cost model {g['costmodel_best']} (α median {g['alpha_median']:.2f})", flush=True)
    cm_json = doc.get("costmodel", {}).get(e2e_results.group_name(device, model, a.shared_prefix))
    if cm_json:
        suffix = "_shared-prefix" if a.shared_prefix else ""
        common.write_json(a.out / f"costmodel_{model}{suffix}.json", cm_json)
    if not a.no_plot:
        try:
            import plot_e2e

            for p in plot_e2e.plot(a.out / "e2e.json", a.out):
                print(f"[e2e] wrote {p}", flush=True)
        except Exception as exc:  # plotting is a convenience; the JSON is the result
            print(f"[e2e] plot skipped: {type(exc).__name__}: {exc}", flush=True)
    print(f"[e2e] done in {time.monotonic() - T0:.0f} s -> {a.out / 'e2e.json'}", flush=True)


if __name__ == "__main__":
    main()
