#!/usr/bin/env python
"""docs/PERFORMANCE.md, generated from the committed results in bench/results (nothing in it is typed by hand).

  python bench/performance_doc.py            # print the document
  python bench/performance_doc.py --write    # write docs/PERFORMANCE.md
  python bench/performance_doc.py --check    # exit 1 if docs/PERFORMANCE.md differs from what the results give

Sections: end to end against stock SGLang (e2e.json, bench_e2e.py), attention kernels against FA3 (kernels.json,
bench_kernels.py), draft acceptance (acceptance.json, bench_acceptance.py), prefill attention (prefill.json,
bench_prefill.py) and page-selection cost (selection.json, bench_selection.py); each with the device, date, versions
and command its JSON records. tests/bench/test_performance_doc.py checks that the committed document is current.
"""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import common

RESULTS = common.REPO / "bench" / "results"
DOC = common.REPO / "docs" / "PERFORMANCE.md"
SPEC_MODES = ("int8", "spec-topk", "spec-dense", "spec-auto")
LOG, CLIENT = "log_tok_per_s", "tok_per_s"


def _f(x, spec=".2f"):
    return "–" if x is None else format(x, spec)


def _versions(v: dict) -> str:
    return ", ".join(f"{k} {x}" for k, x in sorted((v or {}).items()) if x) or "not recorded"


def _provenance(doc: dict, commands=None, versions=None) -> list[str]:
    cmds = commands or [doc.get("command", "not recorded")]
    out = [f"Device: {doc.get('device', '?')}; date: {doc.get('date', 'not recorded')}; versions: "
           f"{_versions(versions if versions is not None else doc.get('versions'))}.", "", "Command:", "", "```"]
    return out + list(cmds) + ["```", ""]


def _figure(name: str, caption: str) -> list[str]:
    """A results PNG, linked from docs/ (only if it is committed next to its JSON)."""
    return [f"![{caption}](../bench/results/{name})", ""] if (RESULTS / name).exists() else []


def e2e_section(doc: dict, figures: bool = True) -> list[str]:
    meta = doc.get("meta", {})
    rows = [r for r in doc.get("rows", []) if r.get("status") == "ok"]
    best = {}  # (mode, ctx, batch) -> the row of the mode's best γ by server-log rate
    for r in rows:
        k = (r["mode"], r["ctx"], r["batch"])
        if k not in best or (r.get(LOG) or 0) > (best[k].get(LOG) or 0):
            best[k] = r
    cells = sorted({(c, b) for _, c, b in best})
    modes = [m for m in SPEC_MODES if any(k[0] == m for k in best)]
    version = (meta.get("versions") or {}).get("sglang")
    out = [f"## End to end: quantspec against stock SGLang{' ' + version if version else ''}, {meta.get('model', '?')}",
           "",
           f"Model {meta.get('model', '?')}; prompts: {meta.get('prompts', '?')}; greedy, "
           f"{rows[0].get('gen') if rows else '?'} new tokens per request. Every mode is a real SGLang server; × = "
           "decode tokens/s over stock SGLang (bf16: BF16 KV cache, default attention backend) in the same cell, "
           "from the server's own \"gen throughput\" log lines (steady state: whole batch decoding, nothing queued). "
           "Spec modes at their best measured γ per cell; τ = accepted tokens per round. int8 = quantspec's INT8 KV "
           "cache without speculation; spec-auto = the default server (`--spec-algo quantspec`). Where the client's "
           "own window (tokens streamed per second) gives a ratio more than 15% off the log's, it follows in "
           "brackets: a stall inside the window that the log's steady-state lines leave out. TTFT: the client's median "
           "time to first token in the same cell (all of the cell's prompts sent at once); cell s: from sending the "
           "cell's prompts to the last request's last token (every prefill and every new token).", ""]
    out += _provenance(meta, meta.get("commands"), meta.get("versions"))
    ttft = [m for m in ("bf16", "spec-auto") if any(best.get((m, c, b), {}).get("ttft_p50_s") for c, b in cells)]
    whole = [m for m in ("bf16", "spec-auto") if any(best.get((m, c, b), {}).get("cell_s") for c, b in cells)]
    head = (["ctx", "batch", "bf16 tok/s"] + [f"{m} ×" for m in modes] + [f"TTFT p50 ms {m}" for m in ttft]
            + [f"cell s {m}" for m in whole])
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c, b in cells:
        base = best.get(("bf16", c, b))
        line = [str(c), str(b), _f(base and base.get(LOG), ".0f")]
        for m in modes:
            r = best.get((m, c, b))
            s = r[LOG] / base[LOG] if r and base and r.get(LOG) and base.get(LOG) else None
            c_ = r[CLIENT] / base[CLIENT] if r and base and r.get(CLIENT) and base.get(CLIENT) else None
            client = f" [client {_f(c_)}]" if s and c_ and abs(c_ / s - 1) > 0.15 else ""
            tau = f" (γ={r['gamma']}, τ={_f(r.get('accept_length'))})" if r and m in ("spec-topk", "spec-dense") else ""
            line.append(_f(s) + client + tau)
        for m in ttft:
            t = best.get((m, c, b), {}).get("ttft_p50_s")
            line.append(_f(t and 1e3 * t, ".0f"))
        for m in whole:
            line.append(_f(best.get((m, c, b), {}).get("cell_s")))
        out.append("| " + " | ".join(line) + " |")
    kv = {m: next((r.get("kv_bytes_per_token") for r in rows if r["mode"] == m and r.get("kv_bytes_per_token")), None)
          for m in ("bf16", "int8")}
    out.append("")
    if kv["bf16"] and kv["int8"]:
        out += [f"KV cache bytes per token (all layers): bf16 {kv['bf16']:.0f}, quantspec {kv['int8']:.0f} "
                f"({kv['int8'] / kv['bf16']:.2f}x).", ""]
    if not figures:
        return out
    return out + _figure(f"e2e_heatmap_{meta.get('model')}.png", "speedup over stock SGLang per cell")


def kernels_section(doc: dict, page: int = 64) -> list[str]:
    rows = [r for r in doc.get("rows", []) if r.get("page") == page]
    us = {(r["kernel"], r["ctx"], r["batch"]): r["us"] for r in rows}
    sh = doc.get("shapes", {})
    versions = {k: doc.get(k) for k in ("torch", "triton", "sgl_kernel") if doc.get(k)}
    out = ["## Attention kernels against FA3", "",
           f"One Llama-3-8B layer (Hq={sh.get('hq')}, Hkv={sh.get('hkv')}, D={sh.get('head_dim')}), page {page}, "
           f"every request at ctx tokens; µs per call ({doc.get('timing')}, cold L2), × = FA3 time / ours. The draft "
           "reads the 4-bit upper planes (top-k: the selected pages; dense: every page), the verify 5 rows of the "
           "INT8 view with page scores, against FA3 on the BF16 cache with the same rows.", ""]
    out += _provenance(doc, versions=versions)
    out += ["| ctx | batch | FA3 decode µs | draft top-k µs (×) | draft dense µs (×) | FA3 5 rows µs | "
            "verify 5 rows µs (×) |", "|---|---|---|---|---|---|---|"]
    for c, b in sorted({(r["ctx"], r["batch"]) for r in rows}):
        fa3, fa5 = us.get(("bf16_fa3", c, b)), us.get(("bf16_fa3_nq5", c, b))
        sp, de, ve = (us.get((k, c, b)) for k in ("draft_sparse", "draft_dense", "verify_nq5_scores"))
        x = lambda a, ref: f"{_f(a, '.1f')} ({_f(ref / a if a and ref else None)})"  # noqa: E731
        out.append(f"| {c} | {b} | {_f(fa3, '.1f')} | {x(sp, fa3)} | {x(de, fa3)} | {_f(fa5, '.1f')} | {x(ve, fa5)} |")
    return out + [""] + _figure("kernels.png", "kernel speedup over FA3 vs context")


def acceptance_section(doc: dict) -> list[str]:
    rows = [r for r in doc.get("rows", []) if r.get("alpha") is not None]
    gammas = sorted({r["gamma"] for r in rows})
    r0 = rows[0]
    same = doc.get("outputs", {})
    out = ["## Draft acceptance", "",
           f"Model {Path(str(doc.get('model', '?'))).name} (real weights: random weights accept every draft, so "
           f"acceptance is only measured on real models); {r0.get('num_prompts')} Python prompts of "
           f"{min(r0['prompt_tokens'])}-{max(r0['prompt_tokens'])} tokens, {r0.get('max_new_tokens')} new tokens "
           f"each, greedy, page {r0.get('page_size')}. α = per-token acceptance ({doc.get('alpha_definition', '')}); "
           "τ = tokens per round."
           + (f" Greedy outputs identical across all configurations for {same['identical_across_configs']}/"
              f"{same['prompts']} prompts (lossless; on bf16 GPUs a near-tie can flip with the batch's summation "
              "order)." if same.get("prompts") else ""), ""]
    out += _provenance(doc)
    out += ["| draft pages | share | " + " | ".join(f"α γ={g}" for g in gammas) + " | τ γ=4 |",
            "|" + "---|" * (len(gammas) + 3)]
    cell = {(r["policy"], r.get("ratio"), r["gamma"]): r for r in rows}
    for pol in sorted({k[0] for k in cell}, key=lambda p: (p != "dense", p)):
        for ratio in sorted({k[1] for k in cell if k[0] == pol}, key=lambda x: x or 0):
            t4 = cell.get((pol, ratio, 4))
            out.append(f"| {pol} | {'all' if ratio is None else f'{ratio:.0%}'} | "
                       + " | ".join(_f((cell.get((pol, ratio, g)) or {}).get("alpha"), ".3f") for g in gammas)
                       + f" | {_f(t4 and t4.get('tau'))} |")
    return out + [""] + _figure("acceptance.png", "acceptance vs γ per draft policy")


def draft_weights_section(doc: dict) -> list[str]:
    """Acceptance with 4-bit draft weights beside the checkpoint's (same prompts, policy and γ)."""
    rows = [r for r in doc.get("rows", []) if r.get("alpha") is not None]
    out = ["## Acceptance with 4-bit draft weights", "",
           "Drafts through the 4-bit copy of the linear weights (`--quantspec-draft-weights int4`, RTN group 128) "
           "beside drafts through the checkpoint's weights, on trained models: same prompts, greedy, page "
           f"{rows[0].get('page_size') if rows else '?'}. α as in Draft acceptance. Acceptance is a property of the "
           "model and the draft, not of the device (the CPU runs the same reference arithmetic in fp32).", ""]
    out += _provenance(doc, commands=doc.get("commands"))
    out += ["| model | prompts | draft pages | γ | α checkpoint weights | α int4 | Δα | τ checkpoint | τ int4 |",
            "|---|---|---|---|---|---|---|---|---|"]
    key = lambda r: (r["model"], r.get("prompt_set"), r["policy"], r.get("ratio"), r["gamma"])  # noqa: E731
    by = {(key(r), r.get("draft_weights")): r for r in rows}
    for k in sorted({key(r) for r in rows}, key=str):
        m, q = by.get((k, "model")), by.get((k, "int4"))
        n = (m or q)
        desc = f"{n['num_prompts']} × {min(n['prompt_tokens'])}-{max(n['prompt_tokens'])} tokens"
        pages = k[2] + ("" if k[3] is None else f" {k[3]:.0%}")
        d = q["alpha"] - m["alpha"] if m and q else None
        out.append(f"| {k[0]} | {desc} | {pages} | {k[4]} | {_f(m and m['alpha'], '.3f')} | "
                   f"{_f(q and q['alpha'], '.3f')} | {_f(d, '+.3f')} | {_f(m and m['tau'])} | {_f(q and q['tau'])} |")
    return out + [""]


def prefill_section(doc: dict) -> list[str]:
    out = ["## Prefill attention", "", f"{doc.get('note', '')}; ms per layer call (× = over stock).", ""]
    out += _provenance(doc, versions={"torch": doc.get("torch")})
    rows = doc.get("rows", [])
    stock = "stock_fa3_ms" if any("stock_fa3_ms" in r for r in rows) else "bf16_sdpa_ms"
    def x(r, key):
        return f"{_f(r.get(key), '.1f')} ({_f(r[key] / r[stock] if r.get(key) and r.get(stock) else None)})"

    engines = [(k, name) for k, name in (("fa3_ms", "FA3 engine"), ("triton_ms", "Triton engine"),
                                         ("sdpa_fp16_ms", "torch path")) if any(r.get(k) for r in rows)]
    out += [f"| Hq:Hkv:D | cached prefix | chunk | stock {'FA3' if stock == 'stock_fa3_ms' else 'causal SDPA'} ms | "
            + "".join(f"{name} ms (×) | " for _, name in engines) + "quantize pages ms |",
            "|---|---|---|---|" + "---|" * len(engines) + "---|"]
    for r in rows:
        out.append(f"| {r.get('hq')}:{r.get('hkv')}:{r.get('head_dim')} | {r['prefix']} | {r['chunk']} | "
                   f"{_f(r.get(stock), '.1f')} | " + "".join(f"{x(r, k)} | " for k, _ in engines)
                   + f"{_f(r.get('quantize_ms'), '.2f')} |")
    return out + [""]


def selection_section(doc: dict) -> list[str]:
    out = ["## Page selection cost", "", f"{doc.get('note', '')}. Settings: {doc.get('settings')}.", ""]
    out += _provenance(doc, versions={k: doc.get(k) for k in ("torch", "triton")})
    pols = list(doc.get("worst_overhead", {}))
    out += ["| model | ctx | batch | round µs (no selection) | " + " | ".join(f"{p} overhead" for p in pols) + " |",
            "|" + "---|" * (4 + len(pols))]
    for r in doc.get("rows", []):
        out.append(f"| {r['model']} | {r['ctx']} | {r['batch']} | {_f(1e3 * r['base_ms'], '.1f')} | "
                   + " | ".join(_f(100 * r["policies"][p]["overhead"], ".1f") + "%" for p in pols) + " |")
    return out + [""]


SECTIONS = (("e2e.json", e2e_section), ("e2e_sglang-0.5.23.json", functools.partial(e2e_section, figures=False)),
            ("e2e_smollm2.json", functools.partial(e2e_section, figures=False)),
            ("kernels.json", kernels_section), ("acceptance.json", acceptance_section),
            ("acceptance_draft_weights.json", draft_weights_section),
            ("prefill.json", prefill_section), ("selection.json", selection_section))


def render(results=RESULTS) -> str:
    out = ["# Performance", "",
           "<!-- generated by `python bench/performance_doc.py --write` from bench/results/*.json: edit those -->", "",
           "Every number below is read from the JSON files in bench/results, each of which records the device, "
           "date, versions and command of its run. Rerun a benchmark with the command shown, then regenerate this "
           "page.", ""]
    for name, section in SECTIONS:
        doc = common.load_json(Path(results) / name)
        if doc:
            out += section(doc)
    return "\n".join(out).rstrip() + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(common.REPO)}")
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed document is not current")
    a = ap.parse_args(argv)
    text = render(a.results)
    if a.check:
        if not DOC.exists() or DOC.read_text() != text:
            sys.exit(f"{DOC} is not current: run python bench/performance_doc.py --write")
        return
    if a.write:
        DOC.write_text(text)
        print(f"wrote {DOC}")
        return
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
