#!/usr/bin/env python
"""Plot bench/results/kernels.json (written by bench_kernels.py): speedup over the BF16 baseline vs context, one
panel per kernel, page size as colour, batch as line style.

  python bench/plot_kernels.py bench/results/kernels.json [out.png]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import common

STYLES = ["-", "--", ":", "-."]
COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red"]


def plot(json_path, png_path=None) -> str:
    plt = common.pyplot()

    json_path = Path(json_path)
    png_path = Path(png_path) if png_path else json_path.with_suffix(".png")
    res = json.loads(json_path.read_text())
    rows = [r for r in res["rows"] if r.get("speedup")]
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    if not kernels:
        return f"nothing to plot in {json_path}"
    batches = sorted({r["batch"] for r in rows})
    pages = sorted({r["page"] for r in rows})
    ncol = min(3, len(kernels))
    nrow = -(-len(kernels) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 3.8 * nrow), squeeze=False)
    for ax, kernel in zip(axes.flat, kernels):
        sel = [r for r in rows if r["kernel"] == kernel]
        for pi, P in enumerate(pages):
            for bi, B in enumerate(batches):
                pts = sorted((r["ctx"], r["speedup"]) for r in sel if r["page"] == P and r["batch"] == B)
                if pts:
                    ax.plot(*zip(*pts), STYLES[bi % len(STYLES)], color=COLORS[pi % len(COLORS)], marker="o",
                            ms=3, label=f"P={P} B={B}")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log", base=2)
        ctxs = sorted({r["ctx"] for r in sel})
        ax.set_xticks(ctxs, [f"{c // 1024}k" if c >= 1024 else str(c) for c in ctxs])
        ax.set_title(f"{kernel} vs {'/'.join(sorted({r['baseline'] for r in sel}))}", fontsize=9)
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel("speedup (baseline time / time)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(kernels):]:
        ax.axis("off")
    fig.suptitle(f"{res['device']} | copy {res['copy_gbps']:.0f} GB/s | torch {res['torch']} triton {res['triton']}",
                 fontsize=10)
    return str(common.save_fig(fig, png_path, dpi=120))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(plot(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
