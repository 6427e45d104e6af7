#!/usr/bin/env python
"""Plot bench/results/acceptance.json (written by bench_acceptance.py): per-token acceptance α and mean accept length
τ vs γ, one line per draft policy and page ratio (colour = policy, line style = ratio), and per-position acceptance
at the largest γ measured.

  python bench/plot_acceptance.py bench/results/acceptance.json [out.png]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import common

COLORS = {"dense": "black", "topk": "tab:blue", "topk-last": "tab:green", "streaming": "tab:orange"}
EXTRA = ["tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "gray"]  # topk+... variants
STYLES = ["-", "--", ":", "-."]


def series(rows):
    """{(policy, ratio): [rows sorted by γ]} in a stable order (dense first, then by policy and ratio)."""
    out = {}
    for r in rows:
        if r.get("alpha") is not None:
            out.setdefault((r["policy"], r["ratio"]), []).append(r)
    order = list(COLORS)
    keys = sorted(out, key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1] or 0))
    return {k: sorted(out[k], key=lambda r: r["gamma"]) for k in keys}


def plot(json_path, png_path=None) -> str:
    plt = common.pyplot()

    json_path = Path(json_path)
    png_path = Path(png_path) if png_path else json_path.with_suffix(".png")
    res = json.loads(json_path.read_text())
    lines = series(res["rows"])
    if not lines:
        return f"nothing to plot in {json_path}"
    ratios = sorted({k[1] for k in lines if k[1] is not None})
    others = sorted({k[0] for k in lines if k[0] not in COLORS})
    color = lambda pol: COLORS.get(pol) or EXTRA[others.index(pol) % len(EXTRA)]  # noqa: E731
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    gmax = max(r["gamma"] for rs in lines.values() for r in rs)
    for (policy, ratio), rs in lines.items():
        label = policy if ratio is None else f"{policy} {ratio * 100:g}%"
        style = dict(color=color(policy), marker="o", ms=4,
                     ls="-" if ratio is None else STYLES[ratios.index(ratio) % len(STYLES)])
        g = [r["gamma"] for r in rs]
        axes[0].plot(g, [r["alpha"] for r in rs], label=label, **style)
        axes[1].plot(g, [r["tau"] for r in rs], label=label, **style)
        last = [r for r in rs if r["gamma"] == gmax]
        if last:
            pos = last[0]["pos_accept"]
            axes[2].plot(range(1, len(pos) + 1), pos, label=label, **style)
    axes[0].set(xlabel="γ (draft tokens per round)", ylabel="α = accepted / (accepted + rejected) drafts",
                title="per-token acceptance")
    axes[1].set(xlabel="γ", ylabel="τ = completion tokens / verifies", title="mean accept length")
    axes[2].set(xlabel="draft position i", ylabel="P(draft i accepted | 1…i-1 accepted)",
                title=f"per-position acceptance, γ={gmax}")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    n = res["rows"][0].get("num_prompts")
    fig.suptitle(f"pycode-30m, {n} prompts, {res['rows'][0].get('max_new_tokens')} new tokens, "
                 f"page {res['rows'][0].get('page_size')} - {res.get('device', '?')}", fontsize=10)
    return f"wrote {common.save_fig(fig, png_path, dpi=110)}"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(plot(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
