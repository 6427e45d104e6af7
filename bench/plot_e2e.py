#!/usr/bin/env python
"""PNGs from bench/results/e2e.json, per (device, model). "Speedup" is ``log_speedup``: decode tok/s from the server's
own "gen throughput" log lines over the stock BF16 row's of the same cell (e2e_results.log_speedups; the client's
streamed-token rate saturates first on one-token-per-event modes and flatters speculation).

* ``e2e_heatmap_<model>.png``: speedup over stock BF16 decoding on the batch × context grid, one panel per mode
  (spec modes at their best measured γ per cell, γ written in the cell; red < 1: slower than stock);
* ``e2e_speedup_<model>.png``: speedup vs batch, one line per context, server log (solid) and the client's ratio
  (dotted, secondary), one panel per mode (the cost model's predictions are not drawn: they are fitted to the
  client's step times);
* ``e2e_gamma_<model>.png``: the γ sweep - speedup vs γ per (ctx, batch) cell, one panel per spec mode;
* ``e2e_tokens_<model>.png``: speedup vs batch × context (the issue's axis), every mode at its best γ per cell, the
  best quantspec mode per cell joined by a line, the 1x / 3x targets and the 256k-token threshold marked.

  python bench/plot_e2e.py [bench/results/e2e.json] [out_dir]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import common
import e2e_results

MODE_ORDER = ("int8", "spec-dense", "spec-topk", "spec-auto")
S = "log_speedup"


def _best_rows(rows):
    """Per (mode, ctx, batch): the row with the highest measured speedup (the best γ of a spec mode)."""
    best = {}
    for r in rows:
        if r.get("status") != "ok" or r.get(S) is None:
            continue
        k = (r["mode"], r["ctx"], r["batch"])
        if k not in best or r[S] > best[k][S]:
            best[k] = r
    return best


def plot(json_path, out_dir) -> list[Path]:
    plt = common.pyplot()
    from matplotlib.colors import TwoSlopeNorm

    doc = json.loads(Path(json_path).read_text())
    e2e_results.log_speedups(doc["rows"])
    out_dir = Path(out_dir)
    written = []
    groups = {}
    for r in doc["rows"]:
        groups.setdefault((r["device"], r["model"], bool(r.get("shared_prefix"))), []).append(r)
    for (device, model, shared), rows in groups.items():
        best = _best_rows(rows)
        modes = [m for m in MODE_ORDER if any(k[0] == m for k in best)]
        if not modes:
            continue
        ctxs = sorted({k[1] for k in best})
        batches = sorted({k[2] for k in best})
        tag = f"{model} on {device}" + (" (shared prompt prefix)" if shared else "")
        stem = model.replace("/", "_") + ("_shared-prefix" if shared else "")

        fig, axes = plt.subplots(1, len(modes), figsize=(max(6.0, 4.2 * len(modes)), 3.6), squeeze=False)
        for ax, mode in zip(axes[0], modes):
            grid = [[best[(mode, c, b)][S] if (mode, c, b) in best else float("nan") for b in batches]
                    for c in ctxs]
            vals = [v for row in grid for v in row if v == v]
            norm = TwoSlopeNorm(vcenter=1.0, vmin=min(vals + [0.99]), vmax=max(vals + [1.01]))
            ax.imshow(grid, cmap="RdYlGn", norm=norm, aspect="auto", origin="lower")
            for i, c in enumerate(ctxs):
                for j, b in enumerate(batches):
                    r = best.get((mode, c, b))
                    if r:
                        g = f"\nγ={r['gamma']}" if r["gamma"] else ""
                        ax.text(j, i, f"{r[S]:.2f}{g}", ha="center", va="center", fontsize=7)
            ax.set_xticks(range(len(batches)), batches)
            ax.set_yticks(range(len(ctxs)), ctxs)
            ax.set_xlabel("batch")
            ax.set_ylabel("context")
            ax.set_title(mode, fontsize=9)
        fig.suptitle(f"decode speedup over stock SGLang BF16 (server-log tok/s) - {tag}", fontsize=10)
        fig.tight_layout()
        written.append(_save(fig, out_dir / f"e2e_heatmap_{stem}.png"))

        fig, axes = plt.subplots(1, len(modes), figsize=(max(6.0, 4.2 * len(modes)), 3.4), squeeze=False, sharey=True)
        for ax, mode in zip(axes[0], modes):
            for c in ctxs:
                pts = [(b, best[(mode, c, b)]) for b in batches if (mode, c, b) in best]
                if not pts:
                    continue
                line, = ax.plot([b for b, _ in pts], [r[S] for _, r in pts], "o-", label=f"ctx {c}")
                client = [(b, r["speedup"]) for b, r in pts if r.get("speedup")]
                if client:
                    ax.plot(*zip(*client), "x:", color=line.get_color(), alpha=0.6)
            ax.axhline(1.0, color="gray", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("batch")
            ax.set_title(f"{mode} (dotted: client tok/s)", fontsize=9)
            ax.legend(fontsize=7)
        axes[0][0].set_ylabel("speedup vs BF16")
        fig.suptitle(tag, fontsize=10)
        fig.tight_layout()
        written.append(_save(fig, out_dir / f"e2e_speedup_{stem}.png"))

        written.append(_tokens_plot(plt, best, modes, tag, out_dir / f"e2e_tokens_{stem}.png"))

        spec = [m for m in ("spec-dense", "spec-topk") if any(r["mode"] == m for r in rows)]
        sweeps = {m: [r for r in rows if r["mode"] == m and r.get("status") == "ok" and r.get(S)]
                  for m in spec}
        if any(len({r["gamma"] for r in v}) > 1 for v in sweeps.values()):
            fig, axes = plt.subplots(1, len(spec), figsize=(max(6.0, 4.5 * len(spec)), 3.4), squeeze=False, sharey=True)
            for ax, mode in zip(axes[0], spec):
                cells = sorted({(r["ctx"], r["batch"]) for r in sweeps[mode]})
                for c, b in cells:
                    pts = sorted((r["gamma"], r[S]) for r in sweeps[mode] if (r["ctx"], r["batch"]) == (c, b))
                    ax.plot(*zip(*pts), "o-", label=f"ctx {c}, b {b}")
                ax.axhline(1.0, color="gray", lw=0.8)
                ax.set_xlabel("γ")
                ax.set_title(mode, fontsize=9)
                ax.legend(fontsize=6)
            axes[0][0].set_ylabel("speedup vs BF16")
            fig.suptitle(f"γ sweep - {tag}", fontsize=10)
            fig.tight_layout()
            written.append(_save(fig, out_dir / f"e2e_gamma_{stem}.png"))
    return written


def _tokens_plot(plt, best, modes, tag, path):
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    markers = dict(zip(MODE_ORDER, "sDo^v"))
    for mode in modes:
        pts = sorted((c * b, r[S]) for (m, c, b), r in best.items() if m == mode)
        ax.scatter(*zip(*pts), marker=markers.get(mode, "o"), s=22, alpha=0.75, label=mode)
    top = {}
    for (m, c, b), r in best.items():
        top[c * b] = max(top.get(c * b, 0.0), r[S])
    xs = sorted(top)
    ax.plot(xs, [top[x] for x in xs], "k-", lw=1.0, alpha=0.6, label="best quantspec mode")
    ax.axhline(1.0, color="red", lw=0.8, ls="--")
    ax.axhline(3.0, color="green", lw=0.8, ls="--")
    ax.axvline(256 * 1024, color="gray", lw=0.8, ls=":")
    ax.text(256 * 1024, ax.get_ylim()[1], " b×ctx = 256k", va="top", fontsize=7, color="gray")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch × context (tokens)")
    ax.set_ylabel("decode tok/s over stock BF16 (server log)")
    ax.set_title(f"speedup vs batch × context - {tag}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    return common.save_fig(fig, path, dpi=120)


if __name__ == "__main__":
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "results" / "e2e.json"
    for p in plot(src, Path(sys.argv[2]) if len(sys.argv) > 2 else src.parent):
        print(p)
