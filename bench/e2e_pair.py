#!/usr/bin/env python
"""Side-by-side end-to-end runs: every mode's server up at once on one GPU, the cells measured alternately, repeated.

Why: issue 5's ratios are stock BF16 against quantspec "in the same run, same prompts". bench_e2e.py runs one server
per mode, one after the other, and a repeat means launching each server again (~60-75 s of device time a launch for
pycode-30m, more than the cells themselves at ~5-15 s each). The same code's rate also moves between launches (session
18, H100: spec-topk 15k x 32 at 41.4k and 49.0k tok/s with the same accept length; bench/results/s18). Here each mode's
server starts once; then, per repeat, every (ctx, batch) cell is measured on each server back to back, the servers'
order alternating between repeats, so a cell's modes are minutes apart at most and a slow period hits both. No cell
starts that ``--budget-s`` (default here 3600) would not cover; ``rep<k>.json`` is rewritten after every cell, so a
call cut short keeps what it measured.

Only one server decodes at a time (the others are idle between requests), so they share the GPU's memory, not its
time. Memory: SGLang sizes a server's static memory as ``--mem-fraction-static`` times the memory free when that
server starts, so with N servers started in turn, server i (0-based) gets ``share / (1 - i * share)`` of what is
then free, ``share = --mem-fraction / N``: each ends up with about ``share`` of the card (``--fractions`` overrides).

Output (``--out``): ``rep<k>.json`` per repeat (bench_e2e's format, all modes), and ``e2e.json`` = their merge by
``e2e_merge.py`` (per cell and mode, the run of the median server-log rate; speedups recomputed). Arguments are
bench_e2e.py's (``--modes``, ``--gammas``, ``--ctx``, ``--batch``, ``--gen``, ``--smoke``, ...) plus ``--repeats``.

  # GPU (gpu-kit in /tmp/site, pycode-30m in /tmp/m): issue 5's cells >= 256k, 3 repeats, one call
  python3 bench/e2e_pair.py --model pycode-30m=/tmp/m --modes bf16,spec-topk --gammas 12 --ctx 15360,8192,4096 \\
      --batch 128,64,32 --gen 930 --repeats 3 --out $OUT/pair
  # CPU: the tiny random Llama, both modes, 2 repeats (~3 min)
  python bench/e2e_pair.py --smoke --repeats 2
"""
from __future__ import annotations

import argparse
import contextlib
import time

import bench_e2e
import e2e_merge
import e2e_results
import e2e_server


def fractions(n: int, total: float) -> list[float]:
    """``--mem-fraction-static`` of the i-th of n servers started in turn, each fraction of the memory then free,
    so that every server ends up with ``total / n`` of the card (see the module docstring)."""
    share = total / n
    return [round(share / (1.0 - i * share), 4) for i in range(n)]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 add_help=False)
    ap.add_argument("--repeats", type=int, default=3, help="passes over the grid (default 3)")
    ap.add_argument("--fractions", help="comma list: --mem-fraction-static per server, in --modes order")
    own, rest = ap.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        ap.print_help()
        raise SystemExit(0)
    if "--smoke" in rest and "--out" not in rest:
        rest += ["--out", "/tmp/sgl_spec_e2e_pair_smoke"]
    if "--budget-s" not in rest and "--time-budget-s" not in rest:  # no cell starts past it; client timeouts
        rest += ["--budget-s", "3600"]
    a = bench_e2e.parse_args(rest)
    a.repeats = own.repeats
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    a.fractions = [float(x) for x in own.fractions.split(",")] if own.fractions else None
    return a


def _line(r: dict, k: int) -> str:
    f = lambda key, spec: "-" if r.get(key) is None else format(r[key], spec)  # noqa: E731
    if r.get("status") != "ok":
        return (f"[pair] rep {k} {r['mode']:<10} γ={r['gamma']} ctx={r['ctx']:>6} b={r['batch']:>3}  "
                f"{str(r.get('status')).upper()}: {str(r.get('reason'))[:200]}")
    return (f"[pair] rep {k} {r['mode']:<10} γ={r['gamma']} ctx={r['ctx']:>6} b={r['batch']:>3}  log tok/s "
            f"{f('log_tok_per_s', '.1f')}  x{f('log_speedup', '.2f')} vs bf16  τ {f('accept_length', '.2f')}  "
            f"client tok/s {f('tok_per_s', '.1f')}  window {f('window_s', '.2f')} s")


def main(argv=None):
    a = parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    ctx_info, meta = bench_e2e.setup(a)
    device, model, path = ctx_info[:3]
    prompts_for = ctx_info[6]
    servers = bench_e2e.plan(a, {}, device, model)
    fracs = a.fractions or fractions(len(servers), a.mem_fraction)
    if len(fracs) != len(servers):
        raise SystemExit(f"--fractions: {len(fracs)} values for {len(servers)} servers {servers}")
    cells = [(ctx, b) for ctx in a.ctx for b in a.batch]
    max_b, max_ctx = max(a.batch), max(a.ctx)
    clock = bench_e2e.Clock(a.budget_s, a.device)
    print(f"[pair] {device}, model {model}, servers {servers} (mem fractions {fracs}), grid ctx {a.ctx} x batch "
          f"{a.batch}, gen {a.gen}, {a.repeats} repeats", flush=True)
    docs = []
    with contextlib.ExitStack() as stack:
        live = []
        for (mode, gamma), frac in zip(servers, fracs):
            args = bench_e2e.server_args(a, ctx_info, mode, gamma, max_b, max_ctx, frac)
            srv = stack.enter_context(e2e_server.launch(args, device=a.device, log_dir=a.log_dir / model,
                                                        model_dir=path, timeout=900, site=a.site,
                                                        overlay=not a.no_overlay))
            print(f"[pair] {mode} γ={gamma} up in {srv.startup_s:.0f} s on port {srv.port}", flush=True)
            live.append((mode, gamma, srv, bench_e2e.common_fields(a, ctx_info, srv, mode, args)))
        for mode, gamma, srv, _ in live:  # first-use compilations, outside every measured window
            bench_e2e._warmup(srv, prompts_for, a, max_ctx, gamma)
        for k in range(a.repeats):
            doc = {"meta": {**meta, "repeat": k, "servers": [[m, g] for m, g, _, _ in live],
                            "order": "cell-major; servers in --modes order on even repeats, reversed on odd"},
                   "rows": []}
            order = live if k % 2 == 0 else live[::-1]
            for ctx, b in cells:
                for mode, gamma, srv, common in order:
                    row = {**bench_e2e._row_base(a, device, model, mode, gamma, ctx, b), **common, "repeat": k}
                    block, _ = bench_e2e.cell_blocker(a, ctx_info, clock, srv, row)  # only this cell is skipped
                    out = ({**row, **block} if block else
                           bench_e2e._measure(a, srv, clock, row, prompts_for, prompts_for(ctx, b)))
                    e2e_results.upsert(doc, out)
                e2e_results.derive(doc, a.model_cfgs, fit=False)  # the cell's speedups, all its modes measured
                e2e_results.save(doc, a.out / f"rep{k}.json")
                for r in doc["rows"]:
                    if (r["ctx"], r["batch"]) == (ctx, b):
                        print(_line(r, k), flush=True)
            docs.append(doc)
    merged = e2e_merge.merge(docs, [str(a.out / f"rep{k}.json") for k in range(len(docs))])
    merged["meta"] = {**merged.get("meta", {}), "pair": {"repeats": a.repeats, "fractions": fracs,
                                                         "finished": time.strftime("%Y-%m-%d %H:%M:%S")}}
    e2e_results.derive(merged, a.model_cfgs)
    e2e_results.save(merged, a.out / "e2e.json")
    print(f"[pair] done in {time.monotonic() - bench_e2e.T0:.0f} s -> {a.out / 'e2e.json'}", flush=True)
    return merged


if __name__ == "__main__":
    main()
