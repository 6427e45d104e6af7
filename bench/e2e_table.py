#!/usr/bin/env python
"""The README's measured tables (markdown) from bench/results: e2e.json (decode speed per mode on the batch x context
grid, issue 5's targets checked), acceptance.json (α, τ per draft policy) and kernels.json (attention kernels vs FA3).
Prints to stdout (or --out FILE) for the lead to paste; every number is read from the JSON files, nothing is typed in.

  python bench/e2e_table.py [--results bench/results] [--out table.md] [--readme README.md]

``--readme`` replaces the text between the lines ``<!-- measured:begin -->`` and ``<!-- measured:end -->`` of that
file (added at the end of its "## Measured" section, or of the file, the first time).

Speedups are tokens/s over stock SGLang (BF16 KV, its default attention backend) in the same cell (same device,
model, context, batch). "best" = the fastest quantspec mode of the cell (spec modes at their best measured γ);
"auto" = what ``--spec-algo quantspec`` alone gives (top-k draft + auto-off). Targets (issue 5): best >= 3.0x where
batch x context >= 256k tokens, and >= 1.0x in every cell.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

QUANT_MODES = ("int8", "spec-topk", "spec-dense", "spec-auto")
BIG = 256 * 1024  # batch x context from which the 3x target applies
TARGET_BIG, TARGET_ALL = 3.0, 1.0


def _f(x, spec=".2f", unit=""):
    return "–" if x is None else f"{format(x, spec)}{unit}"


def _best_by_mode(rows):
    """(mode, ctx, batch) -> the row of that mode with the highest tok/s (the best γ of a spec mode)."""
    best = {}
    for r in rows:
        if r.get("status") != "ok" or not r.get("tok_per_s"):
            continue
        k = (r["mode"], r["ctx"], r["batch"])
        if k not in best or r["tok_per_s"] > best[k]["tok_per_s"]:
            best[k] = r
    return best


def e2e_tables(doc: dict) -> list[str]:
    out = []
    groups = {}
    for r in doc.get("rows", []):
        groups.setdefault((r["device"], r["model"], bool(r.get("shared_prefix"))), []).append(r)
    for (device, model, shared), rows in sorted(groups.items()):
        best = _best_by_mode(rows)
        cells = sorted({(c, b) for (_, c, b) in best})
        if not cells:
            continue
        modes = [m for m in QUANT_MODES if any(k[0] == m for k in best)]
        sglang = next((r.get("sglang") for r in rows if r.get("sglang")), "?")
        out += [f"### Decode throughput: {model} on {device}" + (" (shared prompt prefix)" if shared else ""),
                "",
                f"SGLang {sglang}; greedy, {rows[0].get('gen')} new tokens per request, steady-state window "
                "(all prefills done → first request finished); × = tokens/s over stock BF16 in the same cell; "
                "τ = accept length.", ""]
        head = ["ctx", "batch", "b×ctx", "BF16 tok/s"] + [f"{m} ×" for m in modes] + ["best ×", "ITL p50/p90 ms (best)"]
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        bests, autos = [], []
        for c, b in cells:
            base = best.get(("bf16", c, b))
            line = [str(c), str(b), f"{b * c / 1024:.0f}k", _f(base and base["tok_per_s"], ".0f")]
            cand = []
            for m in modes:
                r = best.get((m, c, b))
                s = r["tok_per_s"] / base["tok_per_s"] if r and base else None
                extra = ""
                if r and m.startswith("spec") and m != "spec-auto":
                    extra = f" (γ={r['gamma']}, τ={_f(r.get('accept_length'))})"
                line.append(_f(s) + extra)
                if s is not None:
                    cand.append((s, r))
                    if m == "spec-auto":
                        autos.append((s, c, b))
            if cand:
                s, r = max(cand, key=lambda x: x[0])
                bests.append((s, c, b))
                line += [f"**{s:.2f}** ({r['mode']})", f"{_f(r.get('itl_p50_ms'))}/{_f(r.get('itl_p90_ms'))}"]
            else:
                line += ["–", "–"]
            out.append("| " + " | ".join(line) + " |")
        out.append("")
        out += _targets("best mode", bests) + _targets("default server (spec-auto)", autos) + [""]
        kv = {m: next((r.get("kv_bytes_per_token") for r in rows if r["mode"] == m and r.get("kv_bytes_per_token")),
                      None) for m in ["bf16"] + modes}
        out += ["KV cache bytes per token (all layers): " + ", ".join(
            f"{m} {_f(v, '.0f')}" for m, v in kv.items() if v), ""]
        skipped = [r for r in rows if r.get("status") != "ok"]
        if skipped:
            out += [f"Not measured: {len(skipped)} configuration(s) (" + "; ".join(sorted(
                {f"{r['mode']} ctx {r['ctx']} b {r['batch']}: {str(r.get('reason'))[:60]}" for r in skipped})[:6])
                + ")", ""]
    return out


def _targets(label, vals) -> list[str]:
    if not vals:
        return []
    lo = min(vals)
    big = [v for v in vals if v[1] * v[2] >= BIG]
    lines = [f"* {label}: slowest cell {lo[0]:.2f}x (ctx {lo[1]}, batch {lo[2]}) - target >= {TARGET_ALL:.1f}x: "
             f"{'met' if lo[0] >= TARGET_ALL else 'NOT met'}"]
    if big:
        lb = min(big)
        lines.append(f"* {label}, batch x context >= 256k ({len(big)} cells): slowest {lb[0]:.2f}x (ctx {lb[1]}, "
                     f"batch {lb[2]}) - target >= {TARGET_BIG:.1f}x: {'met' if lb[0] >= TARGET_BIG else 'NOT met'}")
    return lines


def acceptance_table(doc: dict) -> list[str]:
    rows = [r for r in doc.get("rows", []) if r.get("alpha") is not None]
    if not rows:
        return []
    out = [f"### Acceptance: {Path(str(doc.get('model', '?'))).name} on {doc.get('device', '?')}", "",
           f"{rows[0].get('num_prompts')} Python prompts of {min(rows[0]['prompt_tokens'])}-"
           f"{max(rows[0]['prompt_tokens'])} tokens, {rows[0].get('max_new_tokens')} new tokens each, greedy.", "",
           "| draft pages | ratio | γ | α | τ (accept length) |", "|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["policy"], r.get("ratio") or 0, r["gamma"])):
        ratio = "all" if r["policy"] == "dense" else _f(r.get("ratio"), "g")
        out.append(f"| {r['policy']} | {ratio} | {r['gamma']} | {r['alpha']:.3f} | {r['tau']:.2f} |")
    return out + [""]


def kernels_table(doc: dict, page: int = 64) -> list[str]:
    rows = [r for r in doc.get("rows", []) if r.get("page") == page]
    if not rows:
        return []
    us = {(r["kernel"], r["ctx"], r["batch"]): r["us"] for r in rows}
    cells = sorted({(r["ctx"], r["batch"]) for r in rows})
    sh = doc.get("shapes", {})
    out = [f"### Attention kernels on {doc.get('device')} (page {page}, Hq={sh.get('hq')}, Hkv={sh.get('hkv')}, "
           f"D={sh.get('head_dim')}; {doc.get('timing')})", "",
           "| ctx | batch | FA3 BF16 decode µs | draft top-k µs (×) | draft dense µs (×) | FA3 5 rows µs | "
           "verify 5 rows + scores µs (×) |", "|---|---|---|---|---|---|---|"]
    for c, b in cells:
        fa3, fa5 = us.get(("bf16_fa3", c, b)), us.get(("bf16_fa3_nq5", c, b))
        sp, de, ve = (us.get((k, c, b)) for k in ("draft_sparse", "draft_dense", "verify_nq5_scores"))
        x = lambda a, ref: f"{_f(a, '.1f')} ({_f(ref / a if a and ref else None)})"  # noqa: E731
        out.append(f"| {c} | {b} | {_f(fa3, '.1f')} | {x(sp, fa3)} | {x(de, fa3)} | {_f(fa5, '.1f')} | {x(ve, fa5)} |")
    return out + [""]


BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"


def update_readme(path: Path, text: str) -> None:
    doc = path.read_text()
    block = f"{BEGIN}\n{text.rstrip()}\n{END}"
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + block + rest.split(END, 1)[1]
    else:
        i = doc.find("\n## ", doc.find("## Measured") + 1) if "## Measured" in doc else -1
        doc = (doc.rstrip() + "\n\n" + block + "\n") if i < 0 else (doc[:i].rstrip() + "\n\n" + block + "\n" + doc[i:])
    path.write_text(doc)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--out")
    ap.add_argument("--readme", help="update the measured block of this markdown file in place")
    a = ap.parse_args(argv)
    res = Path(a.results)
    parts = []
    for name, fn in (("e2e.json", e2e_tables), ("acceptance.json", acceptance_table), ("kernels.json", kernels_table)):
        p = res / name
        if p.exists():
            parts += fn(json.loads(p.read_text()))
        else:
            parts += [f"<!-- {name}: not measured yet -->", ""]
    text = "\n".join(parts)
    if a.out:
        Path(a.out).write_text(text)
    if a.readme:
        update_readme(Path(a.readme), text)
    print(text)


if __name__ == "__main__":
    main()
