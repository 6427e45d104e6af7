#!/usr/bin/env python
"""Issue 2's targets as fixed-cost budgets, from a kernel grid (bench_kernels.py's kernels.json; CPU, no GPU needed).

Every timed kernel of the grid is, to within a microsecond or two, ``t = f + bytes / R``: from 64k tokens on, the
time grows at the streaming rate R (~3.0 TB/s on an H100, the measured copy bandwidth, for FA3 and ours alike) and
the rest, f, is a fixed cost of the launch (graph start, launches, first loads, the tail of the page programs, the
merge). For each kernel, page size and batch this fits R and f by least squares over the contexts >= ``--fit-from``.

A target ratio x over the baseline at one cell then sets a **fixed-cost budget** for our kernel: with the baseline's
measured time T_b and our bytes at our fitted rate, ``f_need = T_b / x - bytes / R``; the target is met where our f
is at most f_need. The bandwidth target (80% of copy) sets ``f_need = bytes / (0.8 copy) - bytes / R`` the same way.
Printed per target cell: measured and needed time, our f and f_need, and, where ``--floor`` names launch_floor.json
(bench/launch_floor.py, same harness), what empty launches in the kernel's launch structure take: the part of f
that no kernel work can remove.

    python bench/fixed_cost.py                                     # bench/results/kernels.json
    python bench/fixed_cost.py --grid X/kernels.json --floor Y/launch_floor.json --out bench/results/fixed_cost.json
                                                                  # + fixed_cost.png next to it (batch-1 cells)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
LONG = (65536, 131072, 262144)
# issue 2's "Must show" ratios and where they apply: (kernel, target ratio over the row's baseline, contexts, batches)
RATIO_TARGETS = [
    ("draft_dense", 3.3, LONG, (1, 8)),
    ("verify_nq5_scores", 1.75, LONG, None),  # None: every batch of the grid
    ("draft_sparse", 12.0, (131072,), None),
]
BW_TARGETS = [("draft_dense", 0.8, (131072,), None)]  # fraction of the copy bandwidth measured in the same run
# the launch structure of each kernel at batch 1 (bench/launch_floor.py's cases): dense drafts at long contexts keep
# the hot-token launch, 7% drafts at 128k run its programs in the page launch (draft_launch.GLUON_FUSED_HOT)
FLOOR_CASE = {"draft_dense": "draft_b1", "draft_sparse": "draft_b1_no_hot", "verify_nq5_scores": "verify_b1"}


def fit(points):
    """Least squares of t = f + bytes / R over [(bytes, us)]: (f µs, R TB/s). Two or more points."""
    n = len(points)
    mx = sum(b for b, _ in points) / n
    my = sum(t for _, t in points) / n
    sxx = sum((b - mx) ** 2 for b, _ in points)
    slope = sum((b - mx) * (t - my) for b, t in points) / sxx  # µs a byte
    return my - slope * mx, 1e-6 / slope


def fits(rows, fit_from):
    """{(kernel, page, batch): (f, R)} over the rows with ctx >= fit_from."""
    pts = defaultdict(list)
    for r in rows:
        if r["ctx"] >= fit_from and r.get("bytes") and r.get("us"):
            pts[(r["kernel"], r["page"], r["batch"])].append((r["bytes"], r["us"]))
    return {k: fit(v) for k, v in pts.items() if len(v) >= 2}


def target_cells(grid, fit_from=65536, floor=None):
    """One dict per target cell of the grid (see the module doc)."""
    rows = grid["rows"]
    fx = fits(rows, fit_from)
    copy = grid["copy_gbps"] * 1e9
    floors = {r["case"]: r["us"] for r in (floor or {}).get("rows", [])}
    out = []
    targets = [(k, x, c, b, "ratio") for k, x, c, b in RATIO_TARGETS]
    targets += [(k, x, c, b, "bw") for k, x, c, b in BW_TARGETS]
    for kernel, x, ctxs, batches, kind in targets:
        for r in rows:
            if r["kernel"] != kernel or r["ctx"] not in ctxs or (batches and r["batch"] not in batches):
                continue
            key = (kernel, r["page"], r["batch"])
            if key not in fx or (kind == "ratio" and not r.get("baseline_ms")):
                continue
            f, rate = fx[key]
            stream_us = r["bytes"] / rate * 1e-6
            need_us = r["baseline_ms"] * 1e3 / x if kind == "ratio" else r["bytes"] / (x * copy) * 1e6
            got = r["speedup"] if kind == "ratio" else r["bw_frac"]
            cell = dict(kernel=kernel, target=f"{x:g}x" if kind == "ratio" else f"{x:.0%} of copy", ctx=r["ctx"],
                        batch=r["batch"], page=r["page"], us=r["us"], need_us=need_us, value=got, met=got >= x,
                        rate_tbs=rate, f_us=f, f_need_us=need_us - stream_us, stream_us=stream_us)
            if r["batch"] == 1 and FLOOR_CASE.get(kernel) in floors:
                cell["floor_us"] = floors[FLOOR_CASE[kernel]]
            out.append(cell)
    return out


def line(c):
    fl = f" | empty launches {c['floor_us']:.1f}" if "floor_us" in c else ""
    return (f"{c['kernel']:<18} {c['target']:>12} ctx={c['ctx']:>6} B={c['batch']:>2} P={c['page']:>3} | "
            f"{c['us']:8.1f} us, needs <= {c['need_us']:8.1f} ({'met' if c['met'] else 'MISSED'}) | "
            f"fixed {c['f_us']:5.1f} us, budget {c['f_need_us']:5.1f} (bytes {c['stream_us']:.1f} us at "
            f"{c['rate_tbs']:.2f} TB/s){fl}")


def plot(cells, png_path, title=""):
    """Batch-1 target cells: our fixed part f, the budget f_need the target leaves, and the empty launches' time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [c for c in cells if c["batch"] == 1]
    if not cells:
        return
    x = range(len(cells))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(cells)), 4.6))
    ax.bar([i - 0.2 for i in x], [c["f_us"] for c in cells], 0.4, label="fixed part f (fit)", color="tab:blue")
    ax.bar([i + 0.2 for i in x], [max(c["f_need_us"], 0) for c in cells], 0.4, label="budget the target leaves",
           color="tab:green")
    fl = [(i, c["floor_us"]) for i, c in zip(x, cells) if "floor_us" in c]
    if fl:
        ax.scatter([i for i, _ in fl], [v for _, v in fl], marker="_", s=300, color="k", zorder=3,
                   label="empty launches (launch_floor.py)")
    short = {"draft_dense": "dense", "draft_sparse": "7%", "verify_nq5_scores": "verify"}
    ax.set_xticks(list(x))
    ax.set_xticklabels([f"{short.get(c['kernel'], c['kernel'])} {c['target'].split(' ')[0]} {c['ctx'] // 1024}k "
                        f"P{c['page']}" for c in cells], fontsize=7, rotation=40, ha="right")
    ax.set_ylabel("µs")
    ax.set_title(title or "batch 1: fixed part against the budget of each target", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default=str(RESULTS / "kernels.json"), help="bench_kernels.py's kernels.json")
    ap.add_argument("--floor", default=None, help="bench/launch_floor.py's launch_floor.json (same machine kind)")
    ap.add_argument("--fit-from", type=int, default=65536, help="fit over contexts >= this")
    ap.add_argument("--out", default=None, help="write the cells and the fits as JSON here")
    a = ap.parse_args(argv)
    grid = json.loads(Path(a.grid).read_text())
    floor = json.loads(Path(a.floor).read_text()) if a.floor else None
    cells = target_cells(grid, a.fit_from, floor)
    print(f"[grid] {a.grid}: {grid['device']}, copy {grid['copy_gbps']:.0f} GB/s; fits over ctx >= {a.fit_from}")
    for c in cells:
        print(line(c))
    if a.out:
        fx = fits(grid["rows"], a.fit_from)
        rel = lambda x: x and os.path.relpath(x, RESULTS.parent.parent)  # noqa: E731 (paths from the repository)
        result = dict(grid=rel(a.grid), floor=rel(a.floor), device=grid["device"], copy_gbps=grid["copy_gbps"],
                      torch=grid.get("torch"), triton=grid.get("triton"), sgl_kernel=grid.get("sgl_kernel"),
                      command=" ".join(["python bench/fixed_cost.py"] + (argv if argv is not None else sys.argv[1:])),
                      fit_from=a.fit_from, cells=cells,
                      fits=[dict(kernel=k, page=p, batch=b, f_us=f, rate_tbs=r) for (k, p, b), (f, r) in
                            sorted(fx.items())])
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
        try:
            plot(cells, Path(a.out).with_suffix(".png"), f"batch 1, {grid['device']}: {rel(a.grid)}")
        except ImportError as e:  # no matplotlib here: the JSON is the result
            print(f"[plot] skipped: {e}")


if __name__ == "__main__":
    main()
