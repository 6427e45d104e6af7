#!/usr/bin/env python
"""How much of the target's attention a top-k draft page budget can reach, per context length and layer (CPU study).

Why: on the default grid the top-k drafts are accepted far less at 15k-token contexts (τ ≈ 8 of 13 at γ=12) than at
4k/8k (τ 12-12.8), and the acceptance study (acceptance_select.json) shows dense 4-bit drafts keep τ at 15k. Two
explanations predict different fixes: the pages chosen at the start of a round go *stale* over γ draft steps
(fix: re-select pages during the round, e.g. Quest-style bounds from the key scales/zeros), or the attention is
spread over more pages than the budget holds (fix: none at this budget; only a bigger budget or cheaper pages).

What it measures, on the bundled pycode-30m (fp32, no quantization: this studies the page budget, not the 4-bit
error) and windows of Python text (bench/e2e_prompts.py, the e2e benchmark's corpus): for each of the last ``--rows``
positions t of a prompt and each layer, pages are selected as the server does after a verify, from the query of row
``t - lag`` (the round's first row; lag = how many draft steps later row t is drafted): page score = max over the
page's tokens of the logit, max over the query heads of a KV-head group, summed over KV heads
(sgl_spec/kernels/verify_attention/triton.py's default score), sink pages forced, ``k = min(n, max(min_pages, ceil(ratio·n)))`` of
the ``n = (t - lag) // P`` complete pages (sgl_spec/pages/policies.py): the ``topk`` policy, one list per layer (the
server's default ``topk-head`` keeps one per KV head; acceptance_head.json has the two within 0.01 of α at 7%). Captured mass = the share of row t's softmax
(per query head) on the selected pages plus every token from page n on (the ring and the pages the round
completes, which a draft reads in full). lag 0 is the best this selection rule can do at that budget.

    python bench/attention_mass.py --out bench/results/attention_mass.json    # ~2 min on 8 CPU threads
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


def load_model(path):
    from safetensors.torch import load_file

    cfg = json.loads((Path(path) / "config.json").read_text())
    return cfg, {k: v.float() for k, v in load_file(str(Path(path) / "model.safetensors")).items()}


def _rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rope(x, pos, theta):
    d = x.shape[-1]
    f = pos[:, None].double() * (1.0 / theta ** (torch.arange(0, d, 2).double() / d))[None]
    cos, sin = torch.cat([f.cos()] * 2, -1).float(), torch.cat([f.sin()] * 2, -1).float()
    return x * cos + torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1) * sin


@torch.no_grad()
def forward_qk(cfg, w, ids, rows):
    """Llama forward over ``ids``: (K per layer [Hkv, T, D] after RoPE, Q per layer [Hq, rows, D] of the last
    ``rows`` positions, logits [T, V]). Written out instead of loading transformers' model (tests/support/oracle.py's
    attention hook) because that import needs a test-only shim on CPU torch (tests/shims/torchvision_fix.py);
    tests/bench/test_attention_mass.py checks it against Hugging Face's logits."""
    ks, _, qs, logits = forward_kvq(cfg, w, ids, rows, len(ids))
    return ks, qs, logits


@torch.no_grad()
def forward_kvq(cfg, w, ids, rows, logit_rows):
    """``forward_qk`` plus V per layer [Hkv, T, D]; logits of the last ``logit_rows`` positions only (a 15k-token
    window's full logits would take 0.5 GB): (K, V, Q per layer, logits [logit_rows, V])."""
    hq, hkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg.get("head_dim")
    h = cfg["hidden_size"]
    d = d or h // hq
    eps = cfg["rms_norm_eps"]
    theta = rope_theta(cfg)
    T = len(ids)
    pos = torch.arange(T)
    x = w["model.embed_tokens.weight"][torch.as_tensor(ids)]
    ks, vs, qs = [], [], []
    g = hq // hkv
    for li in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{li}."
        a = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = (a @ w[p + "self_attn.q_proj.weight"].T).view(T, hq, d).transpose(0, 1)
        k = (a @ w[p + "self_attn.k_proj.weight"].T).view(T, hkv, d).transpose(0, 1)
        v = (a @ w[p + "self_attn.v_proj.weight"].T).view(T, hkv, d).transpose(0, 1)
        q, k = _rope(q, pos, theta), _rope(k, pos, theta)
        ks.append(k)
        vs.append(v)
        qs.append(q[:, T - rows:].clone())
        o = torch.nn.functional.scaled_dot_product_attention(
            q[None], k.repeat_interleave(g, 0)[None], v.repeat_interleave(g, 0)[None], is_causal=True)[0]
        x = x + o.transpose(0, 1).reshape(T, hq * d) @ w[p + "self_attn.o_proj.weight"].T
        x = x + mlp(w, p, _rms(x, w[p + "post_attention_layernorm.weight"], eps))
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return ks, vs, qs, _rms(x[T - logit_rows:], w["model.norm.weight"], eps) @ head.T


def rope_theta(cfg):
    return cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta", 10000.0)


def page_scores(logits, n, page, hkv):
    """Verify-rule scores [n] of the first n complete pages from one row's logits [Hq, >= n·P]: max over a page's
    tokens, max over a KV head's query group, summed over KV heads."""
    hq = logits.shape[0]
    return logits[:, : n * page].view(hq, n, page).amax(-1).view(hkv, hq // hkv, n).amax(1).sum(0)


def select_pages(score, n, ratio, min_pages, sink_pages):
    """The ``topk`` rule: sink pages first, then the best scores, ``k = min(n, max(min_pages, ceil(ratio·n)))``
    pages of n (indices in score order)."""
    score = score.clone()
    score[: min(sink_pages, n)] = float("inf")
    return score.topk(min(n, max(min_pages, math.ceil(ratio * n)))).indices


def mlp(w, p, a):
    """Layer ``p``'s SwiGLU MLP of the normed input ``a``."""
    gate = torch.nn.functional.silu(a @ w[p + "mlp.gate_proj.weight"].T)
    return (gate * (a @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T


def row_stats(k, q, T, rows, page=64):
    """Per analysed row j (position ``t = T - rows + j``) of one layer: its softmax [Hq, t + 1] and the verify-rule
    page scores [n] of its ``n = t // page`` complete pages. A row's pages are selected from the scores of the row
    ``lag`` before it, so both depend on the row only: computed once, shared by every (ratio, lag)."""
    hq, hkv, d = q.shape[0], k.shape[0], q.shape[-1]
    g = hq // hkv
    kk = k.repeat_interleave(g, 0)
    probs, scores = [], []
    for j in range(rows):
        t = T - rows + j
        n = t // page
        logits = torch.einsum("hd,htd->ht", q[:, j], kk[:, : t + 1]) / math.sqrt(d)
        probs.append(logits.softmax(-1))
        scores.append(page_scores(logits, n, page, hkv))
    return probs, scores


def masses(stats, ratio, lag, page=64, min_pages=8, sink_pages=1):
    """Captured mass [rows - lag, Hq] (module docstring) from ``row_stats``: rows ``j = lag … rows-1`` drafted with
    the pages selected from row ``j - lag``."""
    probs, scores = stats
    out = []
    for j in range(lag, len(probs)):
        prob, score = probs[j], scores[j - lag]
        n = score.shape[0]
        if n == 0:
            out.append(torch.ones(prob.shape[0]))
            continue
        sel = select_pages(score, n, ratio, min_pages, sink_pages)
        per_page = prob[:, : n * page].view(prob.shape[0], n, page).sum(-1)
        out.append(per_page[:, sel].sum(-1) + prob[:, n * page:].sum(-1))
    return torch.stack(out)


def captured_mass(k, q, T, rows, ratio, lag, page=64, min_pages=8, sink_pages=1):
    """Captured mass [rows - lag, Hq] of one layer: rows ``j = lag … rows-1`` of ``q`` (positions ``T - rows + j``)
    drafted with the pages selected from row ``j - lag``."""
    return masses(row_stats(k, q, T, rows, page), ratio, lag, page, min_pages, sink_pages)


def study(cfg, w, prompts, ratios, lags, rows, page):
    """{(ratio, lag): [L, prompts, rows - lag, Hq] captured mass} over the prompts (token-id lists)."""
    L = cfg["num_hidden_layers"]
    res = {(r, lag): [[] for _ in range(L)] for r in ratios for lag in lags}
    for ids in prompts:
        ks, qs, _ = forward_qk(cfg, w, ids, rows)
        for li in range(L):
            stats = row_stats(ks[li], qs[li], len(ids), rows, page)
            for (r, lag), per_layer in res.items():
                per_layer[li].append(masses(stats, r, lag, page))
    return {key: torch.stack([torch.stack(x) for x in v]) for key, v in res.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "pycode-30m"))
    ap.add_argument("--ctx", default="4096,8192,15360")
    ap.add_argument("--prompts", type=int, default=3, help="windows of the corpus per context length")
    ap.add_argument("--ratios", default="0.07,0.15,0.3")
    ap.add_argument("--lags", default="0,4,8,12")
    ap.add_argument("--rows", type=int, default=26, help="query rows analysed: the last positions of each window")
    ap.add_argument("--page", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    sys.path.insert(0, str(ROOT / "bench"))
    from e2e_prompts import PythonCorpus

    ratios = [float(x) for x in a.ratios.split(",")]
    lags = [int(x) for x in a.lags.split(",")]
    if max(lags) >= a.rows:
        ap.error("--rows must exceed the largest --lags")
    cfg, w = load_model(a.model)
    corpus = PythonCorpus(Path(a.model) / "tokenizer.json")
    rng = np.random.default_rng(a.seed)
    rows_out, t0 = [], time.time()
    for ctx in (int(x) for x in a.ctx.split(",")):
        T = ctx + a.rows  # the analysed rows follow a ctx-token prefix, as a decode at context ctx
        offs = [int(rng.integers(0, len(corpus.ids) - T)) for _ in range(a.prompts)]
        masses = study(cfg, w, [corpus.ids[o: o + T].tolist() for o in offs], ratios, lags, a.rows, a.page)
        for (r, lag), m in masses.items():
            row = dict(ctx=ctx, ratio=r, lag=lag, page=a.page, prompts=a.prompts, rows=a.rows - lag,
                       mean=m.mean().item(), share_below_0_9=(m < 0.9).float().mean().item(),
                       per_layer=[round(x, 4) for x in m.mean(dim=(1, 2, 3)).tolist()])
            rows_out.append(row)
            print(f"[mass] ctx {ctx:6d} ratio {r:.2f} lag {lag:2d}: captured {row['mean']:.3f}  "
                  f"below 0.9 {row['share_below_0_9']:.2f}  per layer {row['per_layer']}", flush=True)
    if a.out:
        meta = dict(model=a.model, corpus=corpus.source, command="python bench/attention_mass.py " + " ".join(sys.argv[1:]),
                    torch=torch.__version__, elapsed_s=round(time.time() - t0, 1), note=__doc__.split("\n\n")[1])
        Path(a.out).write_text(json.dumps(dict(meta=meta, rows=rows_out), indent=1) + "\n")


if __name__ == "__main__":
    main()
