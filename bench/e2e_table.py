#!/usr/bin/env python
"""The README's measured tables (markdown) from bench/results: e2e.json (decode speed per mode on the batch x context
grid, issue 5's targets checked) and the acceptance study (α per draft-page policy, share of pages and γ, from
acceptance_head.json then acceptance_select.json); with --kernels also kernels.json (attention kernels vs FA3).
Prints to stdout (or --out FILE) for the lead to paste; every number is read from the JSON files, nothing is typed in.

  python bench/e2e_table.py [--results bench/results] [--out table.md] [--readme README.md] [--kernels]

``--readme`` replaces the text between the lines ``<!-- measured:begin -->`` and ``<!-- measured:end -->`` of that
file (added at the end of its "## Measured" section, or of the file, the first time).

Speedups are decode tokens/s over stock SGLang (BF16 KV, its default attention backend) in the same cell (same
device, model, context, batch), from the server's own "gen throughput" log lines (``log_tok_per_s``: median over the
steady-state lines, full batch, nothing queued). The client's count of streamed tokens (``tok_per_s``) is a secondary
column only: the Python client handles one SSE event per token for bf16/int8 but about τ tokens per event under
speculation, so it saturates first on the non-speculative modes and flatters speculation. "best" = the fastest
quantspec mode of the cell (spec modes at their best measured γ); "spec-auto" = the auto-off server
(``--quantspec-speculate auto``). e2e_default.json, when present, is its own table: what ``--spec-algo quantspec``
alone gives (top-k-head pages, the default γ, speculating every step, SGLang's overlap scheduler; spec-sync = the same on the
non-overlap scheduler) next to stock BF16 measured in the same run. Targets (issue 5), on the log speedup: best >= 3.0x where batch x context >= 256k tokens, and
>= 1.0x in every cell.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

QUANT_MODES = ("int8", "spec-topk", "spec-sync", "spec-unfused", "spec-triton", "spec-dense", "spec-dense-triton",
               "spec-verify-triton", "spec-verify-gluon", "spec-auto")
BIG = 256 * 1024  # batch x context from which the 3x target applies
TARGET_BIG, TARGET_ALL = 3.0, 1.0
LOG, CLIENT = "log_tok_per_s", "tok_per_s"


def _f(x, spec=".2f", unit=""):
    return "–" if x is None else f"{format(x, spec)}{unit}"


def _k(x):
    return "–" if x is None else f"{x / 1e3:.1f}k" if x >= 1e4 else f"{x:.0f}"


def _best_by_mode(rows):
    """(mode, ctx, batch) -> the row of that mode with the highest server-log tok/s (the best γ of a spec mode)."""
    best = {}
    for r in rows:
        if r.get("status") != "ok" or not (r.get(LOG) or r.get(CLIENT)):
            continue
        k = (r["mode"], r["ctx"], r["batch"])
        rank = lambda x: (x.get(LOG) or 0.0, x.get(CLIENT) or 0.0)  # noqa: E731
        if k not in best or rank(r) > rank(best[k]):
            best[k] = r
    return best


def _ratio(r, base, key):
    return r[key] / base[key] if r and base and r.get(key) and base.get(key) else None


def e2e_tables(doc: dict, title: str = "Decode throughput") -> list[str]:
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
        spec_gammas = {r["gamma"] for k, r in best.items() if k[0].startswith("spec")}
        one_gamma = len(spec_gammas) == 1
        sglang = next((r.get("sglang") for r in rows if r.get("sglang")), "?")
        out += [f"### {title}: {model} on {device}" + (" (shared prompt prefix)" if shared else ""),
                "",
                f"SGLang {sglang}; greedy, {rows[0].get('gen')} new tokens per request"
                + (f", γ={spec_gammas.pop()}" if one_gamma else "")
                + ". × = decode tok/s over stock BF16 in the same cell, from the server's log (steady state: full "
                "batch, nothing queued); τ = accept length; client = tokens streamed to the benchmark client in the "
                "decode window (secondary, see below).", ""]
        head = (["ctx", "batch", "b×ctx", "BF16 tok/s"] + [f"{m} ×" for m in modes] + ["best ×", "client BF16 tok/s",
                f"client × ({' / '.join(modes)})"])
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        bests, autos, skew = [], [], []
        for c, b in cells:
            base = best.get(("bf16", c, b))
            line = [str(c), str(b), f"{b * c / 1024:.0f}k", _f(base and base.get(LOG), ".0f")]
            cand, client = [], []
            for m in modes:
                r = best.get((m, c, b))
                s = _ratio(r, base, LOG)
                extra = ""
                if r and m.startswith("spec") and m != "spec-auto":
                    extra = f" (τ={_f(r.get('accept_length'))})" if one_gamma else \
                        f" (γ={r['gamma']}, τ={_f(r.get('accept_length'))})"
                line.append(_f(s) + extra)
                client.append(_f(_ratio(r, base, CLIENT)))
                if s is not None:
                    cand.append((s, r))
                    if m == "spec-auto":
                        autos.append((s, c, b))
            if cand:
                s, r = max(cand, key=lambda x: x[0])
                bests.append((s, c, b))
                line.append(f"**{s:.2f}** ({r['mode']})")
            else:
                line.append("–")
            line += [_f(base and base.get(CLIENT), ".0f"), " / ".join(client)]
            out.append("| " + " | ".join(line) + " |")
            if base and base.get(LOG) and base.get(CLIENT):
                skew.append((base[LOG] / base[CLIENT], c, b, base))
        out.append("")
        if skew:
            k, c, b, r = max(skew, key=lambda x: x[0])
            out += ["Why the server log: the Python client receives one SSE event per token from bf16/int8 but about "
                    "τ tokens per event under speculation, and saturates at high rates (BF16 ctx "
                    f"{c} batch {b}: {_k(r[CLIENT])} tok/s at the client vs {_k(r[LOG])} in the log), so client "
                    "ratios flatter speculation. The issue's stock baseline is the server-log rate.", ""]
        out += _targets("best mode", bests) + _targets("auto-off server (spec-auto)", autos) + [""]
        out += _repeats_note(rows)
        kv = {m: next((r.get("kv_bytes_per_token") for r in rows if r["mode"] == m and r.get("kv_bytes_per_token")),
                      None) for m in ["bf16"] + modes}
        quant = {v for m, v in kv.items() if m != "bf16" and v}
        if kv["bf16"] and len(quant) == 1:
            q = quant.pop()
            out += [f"KV cache bytes per token (all layers): bf16 {kv['bf16']:.0f}, quantspec modes {q:.0f} "
                    f"({q / kv['bf16']:.2f}x).", ""]
        else:
            out += ["KV cache bytes per token (all layers): " + ", ".join(
                f"{m} {_f(v, '.0f')}" for m, v in kv.items() if v), ""]
        skipped = [r for r in rows if r.get("status") != "ok"]
        if skipped:
            out += [f"Not measured: {len(skipped)} configuration(s) (" + "; ".join(sorted(
                {f"{r['mode']} ctx {r['ctx']} b {r['batch']}: {str(r.get('reason'))[:60]}" for r in skipped})[:6])
                + ")", ""]
    return out


def run_spread(r: dict):
    """A row merged by bench/e2e_merge.py: its cell's fastest server-log rate over its slowest (None: < 2 runs)."""
    v = [x for x in r.get("repeat_log_tok_per_s") or [] if x]
    return max(v) / min(v) if len(v) > 1 else None


def _repeats_note(rows) -> list[str]:
    """For files merged by bench/e2e_merge.py: how many runs each rate is the median of, and how far runs strayed."""
    rep = [r for r in rows if r.get("status") == "ok" and r.get("repeats")]
    if not rep:
        return []
    parts = []
    for mode in sorted({r["mode"] for r in rep}):
        mine = [r for r in rep if r["mode"] == mode]
        n = sorted({r["repeats"] for r in mine})
        spreads = [x for r in mine if (x := run_spread(r)) is not None]
        parts.append(f"{mode} {'/'.join(map(str, n))} run(s)" + (
            f" (a cell's fastest run over its slowest: up to {max(spreads):.2f}x)" if spreads else ""))
    return ["Each rate is the median over separate server runs, back to back on one machine per cell (bench/e2e_merge.py; "
            "× = median over median): " + "; ".join(parts) + ".", ""]


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


ACCEPTANCE_FILES = ("acceptance_head.json", "acceptance_select.json")  # a policy's rows come from the first that has it
ACCEPTANCE_POLICIES = ("dense", "topk", "topk-head", "streaming")


def acceptance_table(docs: list, policies=ACCEPTANCE_POLICIES, names=None) -> list[str]:
    """α per (policy, share of pages) x γ, and τ at γ=4. ``docs``: [(file name, document)]; each policy is taken
    whole from the first document that has it (rows of one run compare with each other; the same policy measured in
    two runs differs a little, as greedy outputs are not identical across differently batched servers). ``names``:
    model path -> the name the e2e results give it (the study records only the path)."""
    src, rows = {}, []
    for name, doc in docs:
        for pol in policies:
            got = [r for r in doc.get("rows", []) if r.get("policy") == pol and r.get("alpha") is not None]
            if got and pol not in src:
                src[pol] = (name, doc)
                rows += got
    if not rows:
        return []
    gammas = sorted({r["gamma"] for r in rows})
    r0, d0 = rows[0], src[rows[0]["policy"]][1]
    same = d0.get("outputs", {})
    model = str(d0.get("model", "?"))
    caption = (f"{r0.get('num_prompts')} Python prompts of {min(r0['prompt_tokens'])}-{max(r0['prompt_tokens'])} "
               f"tokens, {r0.get('max_new_tokens')} new tokens each, greedy, page {r0.get('page_size')}, "
               f"{r0.get('sink_pages')} sink page, min pages {r0.get('min_pages')}; α = per-token acceptance, accepted / "
               "(accepted + rejected) draft tokens (Leviathan et al. 2023; drafts after a rejection are not judged); "
               "keep = accepted / proposed draft tokens; τ = tokens per round.")
    if same.get("prompts"):
        caption += (f" Greedy outputs identical across all configurations for {same['identical_across_configs']}/"
                    f"{same['prompts']} prompts.")
    out = [f"### Acceptance: {(names or {}).get(model, Path(model).name)} on {d0.get('device', '?')}", "", caption, "",
           "| draft pages | share | " + " | ".join(f"α γ={g}" for g in gammas) + " | keep γ=4 | τ γ=4 | file |",
           "|" + "---|" * (len(gammas) + 5)]
    cell = {(r["policy"], r.get("ratio"), r["gamma"]): r for r in rows}
    for pol in policies:
        for ratio in sorted({k[1] for k in cell if k[0] == pol}, key=lambda x: x or 0):
            a = [cell.get((pol, ratio, g)) for g in gammas]
            t4 = cell.get((pol, ratio, 4))
            share = "all" if pol == "dense" else f"{ratio:.0%}"
            out.append(f"| {pol} | {share} | " + " | ".join(_f(r and r["alpha"], ".3f") for r in a)
                       + f" | {_f(t4 and t4.get('keep_rate'), '.3f')} | {_f(t4 and t4['tau'])} | {src[pol][0]} |")
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
    ap.add_argument("--kernels", action="store_true", help="also kernels.json's grid (bench_kernels.py)")
    a = ap.parse_args(argv)
    res = Path(a.results)
    parts = []
    load = lambda name: json.loads((res / name).read_text()) if (res / name).exists() else None  # noqa: E731
    e2e = load("e2e.json")
    parts += e2e_tables(e2e) if e2e else ["<!-- e2e.json: not measured yet -->", ""]
    default = load("e2e_default.json")
    if default:
        sync = any(r.get("mode") == "spec-sync" for r in default.get("rows", []))
        gammas = sorted({r.get("gamma") for r in default.get("rows", []) if r.get("mode") == "spec-topk"})
        g = "/".join(str(x) for x in gammas) or "?"
        parts += e2e_tables(default, title=f"Default server (`--spec-algo quantspec` alone: top-k-head pages, γ={g}, "
                                           "SGLang's overlap scheduler" + ("; spec-sync = the same with "
                                           "`--disable-overlap-schedule`" if sync else "") + ")")
    acc = [(n, d) for n in ACCEPTANCE_FILES if (d := load(n))]
    names = {m.get("model_path"): m.get("model") for m in (e2e or {}).get("runs", []) if m.get("model_path")}
    parts += acceptance_table(acc, names=names) if acc else ["<!-- acceptance: not measured yet -->", ""]
    if a.kernels:
        k = load("kernels.json")
        parts += kernels_table(k) if k else ["<!-- kernels.json: not measured yet -->", ""]
    text = "\n".join(parts)
    if a.out:
        Path(a.out).write_text(text)
    if a.readme:
        update_readme(Path(a.readme), text)
    print(text)


if __name__ == "__main__":
    main()
