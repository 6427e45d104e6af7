#!/usr/bin/env python
"""Which layers' draft page budget decides the draft's next token at long contexts (CPU study, pycode-30m).

Why: at 15k-token contexts top-k drafts are accepted far less than at 4k/8k (server-log τ ≈ 9.4 of 13 at γ=12 against
12.8; bench/results/s18), which keeps the 15k × 32 cell near 3x stock SGLang, and a bigger uniform budget lengthens
the draft pass about as much as it raises τ (session 16: ratio 0.07 / 0.10 / 0.15). bench/attention_mass.py showed the
7% budget captures less attention at 15k mostly in layers 5-7 (and layer 0 everywhere, where it costs nothing at 4k).
Attention mass is not what acceptance needs, though: the draft's *argmax* must match. This study measures that
directly, per layer, so a budget can be moved to the layers whose sparsity changes the token, at the same total.

What it computes, for ``ctx``-token windows of Python text (bench/e2e_prompts.py) continued by ``rows`` tokens the
fp32 target generates greedily (the server's greedy decoding; ``--text`` keeps the corpus text): one fp32 forward of the
target (no quantization; its next-token argmax at each of the last ``rows`` positions is the reference), then for
each such row ``t`` a draft forward of that one token, teacher-forced (every earlier token's K/V is the target's, as
the verify wrote them), where every layer's attention reads

* the complete pages ``0 … n-1`` (``n = t // P``) through the 4-bit upper plane (sgl_spec/kernels/quantize_pages/ref.py, the
  draft view), only the selected ones for a sparse draft: sinks first, then the top scores of the row ``t - lag``
  (the round's verify row: max logit over a page's tokens, max over a KV head's query group, summed over KV heads; the
  ``topk`` rule of bench/attention_mass.py), ``k_l = min(n, max(min_pages, ceil(ratio_l · n)))`` pages in layer l;
* the tokens from page n on and its own K/V in full precision (the hot ring).

Agreement = share of rows whose draft argmax equals the target's (a per-token acceptance proxy: greedy verification
accepts a draft token iff it is the target's argmax; quantization of the target's own view is left out).
Configurations: ``dense`` (every page, 4-bit: the quantization's own loss), ``uniform`` (ratio 0.07 in every layer),
``only<l>`` (layer l dense, the others uniform: what layer l's sparsity costs) and ``--alloc`` lists of per-layer
ratios (e.g. a reallocation at the same page total). Windows are split into a calibration half and an evaluation half
so an allocation chosen on one is judged on the other.

    python bench/draft_agreement.py --ctx 15360 --windows 6 --out bench/results/draft_agreement.json   # ~10 min, 8 threads
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import attention_mass as am  # noqa: E402  (model loading, RMSNorm, RoPE)


def target_forward(cfg, w, ids, rows):
    """fp32 forward over ``ids``: per layer K, V [Hkv, T, D] (K after RoPE) and Q [Hq, rows, D] of the last ``rows``
    positions, plus the logits [rows, V] there (bench/attention_mass.py's forward)."""
    return am.forward_kvq(cfg, w, ids, rows, rows)


def draft_view(k, v, page):
    """The 4-bit upper-plane view (what a draft reads) of the complete pages of one layer's K, V [Hkv, T, D]:
    [Hkv, n·P, D] each, quantized per page as the server does (keys per channel, values per token)."""
    from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref, quantize_pages_ref

    hkv, T, d = k.shape
    n = T // page
    if n == 0:
        return k[:, :0], v[:, :0]
    kp = k[:, : n * page].reshape(hkv, n, page, d).transpose(0, 1)  # [n, Hkv, P, D]
    vp = v[:, : n * page].reshape(hkv, n, page, d).transpose(0, 1)
    t = quantize_pages_ref(kp, vp)
    k4 = dequant_keys_ref(t["k_upper"], t["k_lower"], t["k_scale"], t["k_zero"], draft=True)
    v4 = dequant_values_ref(t["v_upper"], t["v_lower"], t["v_scale"], t["v_zero"], draft=True)
    return (k4.transpose(0, 1).reshape(hkv, n * page, d), v4.transpose(0, 1).reshape(hkv, n * page, d))


def page_scores(q, k, n, page):
    """Verify-rule scores [n] of the complete pages for one query row q [Hq, D] against K [Hkv, ≥ n·P, D]."""
    hq, d = q.shape
    hkv = k.shape[0]
    logits = torch.einsum("hd,htd->ht", q, k.repeat_interleave(hq // hkv, 0)[:, : n * page]) / math.sqrt(d)
    return am.page_scores(logits, n, page, hkv)


def select(scores, n, ratio, min_pages, sink_pages):
    """Page ids a draft reads, ascending (all when ratio is None)."""
    if ratio is None or n == 0:
        return torch.arange(n)
    return am.select_pages(scores, n, ratio, min_pages, sink_pages).sort().values


@torch.no_grad()
def draft_logits(cfg, w, ids, t, T, ks, vs, views, sel, page, new_kv=None):
    """Next-token logits [V] of the draft forward of row position ``t`` (module docstring); ``sel[l]``: layer l's
    page ids; ``views[l]``: layer l's 4-bit K, V of the complete pages. ``new_kv`` (a list): gets the row's own
    (K, V) [Hkv, 1, D] per layer."""
    hq, hkv, h = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    d = cfg.get("head_dim") or h // hq
    eps, theta, g = cfg["rms_norm_eps"], am.rope_theta(cfg), hq // hkv
    n = t // page
    x = w["model.embed_tokens.weight"][ids[t]][None]
    pos = torch.tensor([t])
    for li in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{li}."
        a = am._rms(x, w[p + "input_layernorm.weight"], eps)
        q = am._rope((a @ w[p + "self_attn.q_proj.weight"].T).view(1, hq, d).transpose(0, 1), pos, theta)  # [Hq,1,D]
        k = am._rope((a @ w[p + "self_attn.k_proj.weight"].T).view(1, hkv, d).transpose(0, 1), pos, theta)
        v = (a @ w[p + "self_attn.v_proj.weight"].T).view(1, hkv, d).transpose(0, 1)
        if new_kv is not None:
            new_kv.append((k, v))
        k4, v4 = views[li]
        tok = (sel[li][:, None] * page + torch.arange(page)[None]).reshape(-1)  # selected pages' tokens
        kk = torch.cat([k4[:, tok], ks[li][:, n * page: t], k], 1)  # [Hkv, S, D]
        vv = torch.cat([v4[:, tok], vs[li][:, n * page: t], v], 1)
        o = torch.softmax(q @ kk.repeat_interleave(g, 0).transpose(1, 2) / math.sqrt(d), -1) @ vv.repeat_interleave(g, 0)
        x = x + o.transpose(0, 1).reshape(1, hq * d) @ w[p + "self_attn.o_proj.weight"].T
        x = x + am.mlp(w, p, am._rms(x, w[p + "post_attention_layernorm.weight"], eps))
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return (am._rms(x, w["model.norm.weight"], eps) @ head.T)[0]


@torch.no_grad()
def greedy_window(cfg, w, prefix, rows, page):
    """``prefix`` + ``rows + 1`` tokens the fp32 target generates greedily from it: the analysed rows are then the
    model's own continuation, as in the server's greedy decoding (teacher-forcing natural text instead puts many rows
    on near-ties the model would never generate, and agreement there says little about acceptance)."""
    ks, vs, _, logits = target_forward(cfg, w, prefix, 1)
    ids = list(prefix) + [int(logits[0].argmax())]
    for _ in range(rows):
        t = len(ids) - 1
        views = [(k[:, : (t // page) * page], v[:, : (t // page) * page]) for k, v in zip(ks, vs)]
        sel = [torch.arange(t // page)] * len(ks)
        kv = []
        nxt = draft_logits(cfg, w, ids, t, len(ids), ks, vs, views, sel, page, new_kv=kv).argmax()
        ks = [torch.cat([k, a], 1) for k, (a, _) in zip(ks, kv)]
        vs = [torch.cat([v, b], 1) for v, (_, b) in zip(vs, kv)]
        ids.append(int(nxt))
    return ids[:-1]


def configs(L, ratio, allocs):
    """name -> per-layer ratios (None = every page)."""
    out = {"dense": [None] * L, "uniform": [ratio] * L}
    out.update({f"only{li}": [None if j == li else ratio for j in range(L)] for li in range(L)})
    for a in allocs:
        r = [float(x) for x in a.split(":")]
        if len(r) != L:
            raise SystemExit(f"--alloc {a}: {len(r)} ratios for {L} layers")
        out["alloc " + a] = r
    return out


def window(cfg, w, ids, rows, lag, page, cfgs, min_pages, sink_pages):
    """{config: [rows - lag] bool agreements, 'pages:' + config: mean pages read a layer} for one window."""
    T = len(ids)
    ks, vs, qs, tlog = target_forward(cfg, w, ids, rows)
    L = len(ks)
    views = [draft_view(ks[li], vs[li], page) for li in range(L)]
    want = tlog.argmax(-1)
    res = {name: [] for name in cfgs}
    pages = {name: [] for name in cfgs}
    for j in range(lag, rows):
        t = T - rows + j
        n = t // page
        sc = [page_scores(qs[li][:, j - lag], ks[li], n, page) for li in range(L)]
        for name, ratios in cfgs.items():
            sel = [select(sc[li], n, ratios[li], min_pages, sink_pages) for li in range(L)]
            res[name].append(bool(draft_logits(cfg, w, ids, t, T, ks, vs, views, sel, page).argmax() == want[j]))
            pages[name].append(sum(len(s) for s in sel) / L)
    return res, pages


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "pycode-30m"))
    ap.add_argument("--ctx", type=int, default=15360)
    ap.add_argument("--windows", type=int, default=6, help="windows of the corpus (first half: calibration)")
    ap.add_argument("--rows", type=int, default=96, help="rows analysed a window: its last positions")
    ap.add_argument("--lag", type=int, default=6, help="draft steps between the selecting verify row and the row")
    ap.add_argument("--ratio", type=float, default=0.07)
    ap.add_argument("--min-pages", type=int, default=8)
    ap.add_argument("--sink-pages", type=int, default=1)
    ap.add_argument("--page", type=int, default=64)
    ap.add_argument("--alloc", action="append", default=[], help="per-layer ratios, colon separated (repeatable)")
    ap.add_argument("--text", dest="greedy", action="store_false",
                    help="analyse the corpus text itself instead of the model's greedy continuation of its prefix")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    from e2e_prompts import PythonCorpus

    cfg, w = am.load_model(a.model)
    cfgs = configs(cfg["num_hidden_layers"], a.ratio, a.alloc)
    corpus = PythonCorpus(Path(a.model) / "tokenizer.json")
    rng = np.random.default_rng(a.seed)
    T = a.ctx + a.rows
    offs = [int(rng.integers(0, len(corpus.ids) - T)) for _ in range(a.windows)]
    t0, per_window = time.time(), []
    for i, o in enumerate(offs):
        ids = corpus.ids[o: o + T].tolist()
        if a.greedy:
            ids = greedy_window(cfg, w, ids[: a.ctx], a.rows, a.page)
        res, pages = window(cfg, w, ids, a.rows, a.lag, a.page, cfgs, a.min_pages, a.sink_pages)
        per_window.append({"offset": o, "agree": {k: float(np.mean(v)) for k, v in res.items()},
                           "pages": {k: float(np.mean(v)) for k, v in pages.items()}, "n": len(res["dense"])})
        print(f"[agree] window {i} ({time.time() - t0:.0f} s): " + "  ".join(
            f"{k} {np.mean(v):.3f}" for k, v in res.items()), flush=True)
    half = (a.windows + 1) // 2
    rows_out = []
    for name in cfgs:
        cal = [p["agree"][name] for p in per_window[:half]]
        ev = [p["agree"][name] for p in per_window[half:]]
        row = {"config": name, "ratios": cfgs[name], "agree_all": float(np.mean(cal + ev)),
               "agree_calibration": float(np.mean(cal)), "agree_evaluation": float(np.mean(ev)) if ev else None,
               "pages_per_layer": float(np.mean([p["pages"][name] for p in per_window]))}
        rows_out.append(row)
        print(f"[agree] {name:<28} all {row['agree_all']:.3f}  calibration {row['agree_calibration']:.3f}  "
              f"evaluation {row['agree_evaluation'] if ev else float('nan'):.3f}  pages/layer "
              f"{row['pages_per_layer']:.1f}", flush=True)
    if a.out:
        meta = dict(model=a.model, corpus=corpus.source, ctx=a.ctx, rows=a.rows, lag=a.lag, ratio=a.ratio,
                    greedy=a.greedy, min_pages=a.min_pages, page=a.page, windows=per_window, torch=torch.__version__,
                    command="python bench/draft_agreement.py " + " ".join(sys.argv[1:]),
                    elapsed_s=round(time.time() - t0, 1), note=__doc__.split("\n\n")[1])
        Path(a.out).write_text(json.dumps(dict(meta=meta, rows=rows_out), indent=1) + "\n")


if __name__ == "__main__":
    main()
