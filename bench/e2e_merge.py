#!/usr/bin/env python
"""Merge repeated bench_e2e.py runs of the same grid into one results file whose rows are per-cell medians.

Why: on the lent H200s the stock BF16 server's steady-state rate moved by up to 1.5x between two runs of the same
cell (session 10, ``e2e_launches_ab.json``), and one run's windows are 0.3-3 s long. A speedup read off one BF16 run
and one quantspec run inherits that noise; the median of several runs per mode, taken back to back on one machine,
does not depend on one slow or fast run.

Each input is an ``e2e.json`` of bench_e2e.py (one invocation; any modes). Rows are grouped by bench_e2e's row key
(device, model, mode, γ, ctx, batch, shared prefix); for each group the row of the median server-log rate
(``log_tok_per_s``; the lower middle one for an even count) is kept whole, so its accept length, ITL and window stay
the ones that rate was measured with. A run without a server-log rate for the cell (no steady full-batch log line,
e.g. the first request finished before the last prefill) does not count; a cell no run rated keeps one such row.
The kept row gains:

* ``repeats``: how many runs measured the cell (status ok);
* ``repeat_log_tok_per_s`` / ``repeat_tok_per_s`` / ``repeat_accept_length``: every run's value, in input order;
* ``repeat_files``: which input each came from (its index in ``meta.merged_from``).

Derived fields (speedups against the bf16 row of the same cell, the cost-model fit) are recomputed on the merged
rows, so ``log_speedup`` = median quantspec rate / median BF16 rate. The output is a normal results file:
``bench/e2e_table.py`` and ``bench/plot_e2e.py`` read it unchanged.

  python bench/e2e_merge.py --out bench/results/e2e_default.json [--gen-for 15360:32:930] run1/e2e.json run2/e2e.json ...
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import e2e_results
from e2e_table import CLIENT, LOG, run_spread


def _rate(r: dict) -> float:
    return r.get(LOG) or 0.0


def merge(docs: list[dict], names: list[str], gen_for: dict = None) -> dict:
    """One results document from several bench_e2e runs (see the module docstring). ``gen_for``: {(ctx, batch): gen}
    takes that cell only from runs with that many new tokens per request (every mode of a cell must come from runs
    of one length: a longer one where the default gave no steady window)."""
    gen_for = gen_for or {}
    groups: dict = {}
    failed: dict = {}
    models: dict = {}
    for i, doc in enumerate(docs):
        models.update(doc.get("models", {}))
        for r in doc.get("rows", []):
            want = gen_for.get((r.get("ctx"), r.get("batch")))
            if want is not None and r.get("gen") != want:
                continue
            k = e2e_results.row_key(r)
            if r.get("status") == "ok" and _rate(r) > 0:
                groups.setdefault(k, []).append((i, r))
            else:
                failed.setdefault(k, r)
    rows = []
    for k, got in groups.items():
        order = sorted(got, key=lambda x: _rate(x[1]))
        _, mid = order[(len(order) - 1) // 2]
        rows.append({**mid, "repeats": len(got),
                     "repeat_log_tok_per_s": [r.get(LOG) for _, r in got],
                     "repeat_tok_per_s": [r.get(CLIENT) for _, r in got],
                     "repeat_accept_length": [r.get("accept_length") for _, r in got],
                     "repeat_files": [i for i, _ in got]})
    rows += [r for k, r in failed.items() if k not in groups]  # measured by no run: keep why
    runs = [m for d in docs for m in d.get("runs", [])]
    out = {"meta": {**(docs[-1].get("meta", {}) if docs else {}), "merged_from": names,
                    "merge": "per row key, the run with the median server-log tok/s (bench/e2e_merge.py)"},
           "runs": runs, "rows": rows, "models": models}
    cfgs = {name: (m["config"], m["page_size"]) for name, m in models.items()}
    e2e_results.derive(out, cfgs)
    return out


def spread(doc: dict) -> list[str]:
    """One line per mode: how far single runs strayed from the median (max/min over the cell's runs)."""
    by_mode: dict = {}
    for r in doc["rows"]:
        x = run_spread(r)
        if x is not None:
            by_mode.setdefault(r["mode"], []).append((x, r["ctx"], r["batch"]))
    out = []
    for mode, xs in sorted(by_mode.items()):
        worst = max(xs)
        out.append(f"[merge] {mode}: {len(xs)} cells with >1 run, max/min of a cell's runs: median "
                   f"{statistics.median(x[0] for x in xs):.2f}, worst {worst[0]:.2f} (ctx {worst[1]} b {worst[2]})")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gen-for", action="append", default=[], metavar="CTX:BATCH:GEN",
                    help="take this cell only from runs with GEN new tokens per request (repeatable)")
    ap.add_argument("inputs", nargs="+")
    a = ap.parse_args(argv)
    gen_for = {}
    for spec in a.gen_for:
        c, b, g = (int(x) for x in spec.split(":"))
        gen_for[(c, b)] = g
    docs = [json.loads(Path(p).read_text()) for p in a.inputs]
    doc = merge(docs, [str(p) for p in a.inputs], gen_for)
    e2e_results.save(doc, a.out)
    for line in spread(doc):
        print(line)
    for r in sorted(doc["rows"], key=lambda r: (r["mode"], r["ctx"], r["batch"])):
        if r.get("status") == "ok":
            s = r.get("log_speedup")
            print(f"[merge] {r['mode']:10s} γ={r['gamma']:<2} ctx={r['ctx']:6d} b={r['batch']:4d} "
                  f"log tok/s {r.get(LOG) or 0:10.1f} (runs {r['repeats']})"
                  + (f"  x{s:.2f} vs bf16" if s else ""))
    print(f"[merge] {len(doc['rows'])} rows -> {a.out}")


if __name__ == "__main__":
    main()
