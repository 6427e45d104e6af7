#!/usr/bin/env python
"""Selection cost: what page scoring + top-k selection add to one draft-verify round, on the GPU.

One attention-only round of an L-layer model, every layer: γ x draft_decode over the sparse pages (ratio 7%, min 8
pages, 1 sink: the server's defaults) + one verify_attention over γ+1 rows. Timed as one CUDA graph each:

  base      verify without scores, no selection (what a round would cost if the draft pages came for free)
  <policy>  verify with scores (every layer) + the policy's ``after_verify`` (sgl_spec/pages/policies.py: one
            select_topk_pages launch over all layers: forced recent/completed pages, score smoothing if any, the
            per-slot table update) + its next ``for_round`` (the batch's page lists from the per-slot tables), for
            each --policies entry
  overhead = (t_policy - t_base) / t_policy         (criterion: <= 6%)

``topk-head`` (per-kv-head tables) selects Hkv lists per layer; its round still drafts over the per-layer lists
(the same number of pages and bytes per head). ``+lse scores``: the verify with --quantspec-page-score lse.
Because MLPs, projections, sampling and the host are left out, the round here is much cheaper than a real one and
the overhead is an UPPER BOUND of its share of a full model round. Also per configuration: ``select`` (the policy's
after_verify alone, graph), ``for_round`` (alone, graph) and ``host`` (each called eagerly: the launch time the
server pays per round, as it calls them outside any graph; the GPU work is ``select`` / ``for_round``).

Shapes: pycode-30m (L=8, Hq=4, Hkv=2, D=128: models/pycode-30m) and a Llama-3-8B layer stack (L=32, Hq=32, Hkv=8,
D=128), bf16, P=64, every request at ``ctx`` tokens (its window ends at the newest token); the layers cycle over
enough disjoint copies of the pool that L2 (50 MB) does not hold a previous layer's pages.

  python bench/bench_selection.py --out $OUT/selection.json          # GPU: 2 models x 4 ctx x 3 batch, < 4 min
  python bench/bench_selection.py --smoke --out /tmp/sel.json        # CPU: tiny shapes, reference kernels
"""
from __future__ import annotations

import argparse
import gc
import math
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import torch

import common
import kernel_cases  # noqa: F401  (makes sgl_spec importable from this checkout)
from kernel_timing import wall_ms
from sgl_spec.kernels.draft_decode import draft_decode
from sgl_spec.kernels.verify_attention import verify_attention
from sgl_spec.pages import policies as pagetable
from sgl_spec.pages.view import PageScores
from sgl_spec.kernels.select_topk_pages.ref import page_counts
from sgl_spec.kvcache.format import KVFormat

T0 = time.time()
MODELS = {"pycode-30m": dict(L=8, hq=4, hkv=2, d=128), "llama3-8b": dict(L=32, hq=32, hkv=8, d=128)}
L2_BYTES = 50 << 20
DTYPE = torch.bfloat16


def parse_args(argv=None):
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=lambda s: s.split(","), default=list(MODELS))
    ap.add_argument("--ctx", type=ints, default=None, help="default 8192,32768,65536,131072")
    ap.add_argument("--batch", type=ints, default=None, help="default 1,8,32")
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--page", type=int, default=64)
    ap.add_argument("--ratio", type=float, default=0.07)
    ap.add_argument("--min-pages", type=int, default=8)
    ap.add_argument("--sink-pages", type=int, default=1)
    ap.add_argument("--policies", type=lambda s: s.split(","), default=["topk", "topk+r0.25+ema0.5", "topk-head"],
                    help="topk[-head][+r<share>][+ema<β>|+max] (as bench_acceptance.py names them)")
    ap.add_argument("--rep-ms", type=float, default=60, help="do_bench repetition time per measurement")
    ap.add_argument("--time-budget-s", type=float, default=200, help="start no configuration after this")
    ap.add_argument("--out", type=Path, default=None, help="JSON (default bench/results/selection.json)")
    ap.add_argument("--smoke", action="store_true", help="CPU, pycode-30m heads with 2 layers, ctx 300/700, B 1/2, "
                    "reference kernels, wall clock: checks the tool runs, times nothing useful")
    a = ap.parse_args(argv)
    a.device = "cpu" if a.smoke else "cuda"
    a.ctx = a.ctx or ([300, 700] if a.smoke else [8192, 32768, 65536, 131072])
    a.batch = a.batch or ([1, 2] if a.smoke else [1, 8, 32])
    a.out = a.out or (Path("/tmp/sgl_spec_selection.json") if a.smoke else
                      Path(__file__).resolve().parent / "results" / "selection.json")
    if a.smoke:
        a.models = ["pycode-30m"]
    return a


def policy_cfg(a, name):
    base, *opts = name.split("+")
    if base not in ("topk", "topk-head"):
        raise SystemExit(f"--policies: {name!r} is not topk[-head][+r<share>][+ema<β>|+max]")
    kw = dict(recent_share=0.0, score_smoothing="none", score_ema=0.5)
    for o in opts:
        if o == "max":
            kw["score_smoothing"] = "max"
        elif o.startswith("ema"):
            kw.update(score_smoothing="ema", score_ema=float(o[3:]))
        elif o.startswith("r"):
            kw["recent_share"] = float(o[1:])
        else:
            raise SystemExit(f"--policies: bad option {o!r} in {name!r}")
    return SimpleNamespace(page_size=a.page, topk_ratio=a.ratio, min_pages=a.min_pages, sink_pages=a.sink_pages,
                           draft_pages=base, dense_draft=False, **kw)


# ---- inputs --------------------------------------------------------------------------------------------------------
def make_pool(m, B, ctx, P, dev, gen):
    """One batch's quantized pages (random planes, plausible scales) + ring + page table, pages in random order."""
    n_pg = -(-ctx // P)
    store = KVFormat(P, m["hkv"], m["d"]).alloc(B * n_pg, device=dev)
    for t in (store.k_upper, store.k_lower, store.v_upper, store.v_lower):
        t.random_(0, 256)
    for s, z in ((store.k_scale, store.k_zero), (store.v_scale, store.v_zero)):
        s.uniform_(0.01, 0.03)
        z.uniform_(-0.3, -0.1)
    hot_k = torch.randn(B, 2, P, m["hkv"], m["d"], dtype=DTYPE, device=dev)
    table = torch.randperm(B * n_pg, generator=gen).view(B, n_pg).to(device=dev, dtype=torch.int32)
    return SimpleNamespace(store=store, hot_k=hot_k, hot_v=torch.randn_like(hot_k), table=table,
                           slot=torch.arange(B, dtype=torch.int32, device=dev))


def pool_bytes(m, B, ctx, P):
    n_pg = -(-ctx // P)
    return B * n_pg * (m["hkv"] * P * m["d"] * 2 + 4 * m["hkv"] * (P + m["d"]) * 2)


def draft_pages(pool, ctx, a, gen):
    """A sparse page list of the budget select_topk_pages would give (sinks + random others, ascending)."""
    B, n = pool.table.shape[0], (ctx - 1) // a.page
    k = max(min(n, max(a.min_pages, math.ceil(a.ratio * n))), min(a.sink_pages, n))
    s = min(a.sink_pages, n, k)
    ids = torch.zeros(B, max(k, 1), dtype=torch.int32)
    pt = pool.table.cpu()
    for b in range(B):
        rest = torch.randperm(n - s, generator=gen)[: k - s].sort().values + s
        ids[b, :k] = pt[b, torch.cat([torch.arange(s), rest])]
    dev = pool.table.device
    return ids.to(dev), torch.full((B,), k, dtype=torch.int32, device=dev), k


# ---- timing --------------------------------------------------------------------------------------------------------
def timer(a):
    if a.device == "cpu":
        return wall_ms
    import triton.testing

    def graphed(fn):
        for _ in range(2):
            fn()  # JIT compile and allocations outside the capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.cuda.graph(g, stream=s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        return triton.testing.do_bench(g.replay, warmup=10, rep=a.rep_ms, return_mode="median")
    return graphed


def host_ms(fn, dev, n=20):
    """Host time of an eager call (launches only: no sync inside the timed loop), median of n."""
    fn()
    if dev == "cuda":
        torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
        if dev == "cuda":
            torch.cuda.synchronize()
    return statistics.median(ts)


# ---- one configuration ---------------------------------------------------------------------------------------------
def run_config(a, name, m, ctx, B, t, gen):
    dev, P, G = a.device, a.page, a.gamma
    L, hq, hkv, d = m["L"], m["hq"], m["hkv"], m["d"]
    copies = max(1, min(L, math.ceil(4 * L2_BYTES / pool_bytes(m, B, ctx, P))))
    pools = [make_pool(m, B, ctx, P, dev, gen) for _ in range(copies)]
    pages = [draft_pages(p, ctx, a, gen) for p in pools]
    k = pages[0][2]
    sm = 1.0 / math.sqrt(d)
    maxp = pools[0].table.shape[1]
    pos = ctx - 1
    hot_start = torch.full((B,), (pos // P) * P, dtype=torch.int32, device=dev)
    hot_len = torch.full((B,), pos % P + 1, dtype=torch.int32, device=dev)
    q_start = torch.full((B,), ctx - (G + 1), dtype=torch.int32, device=dev)
    qd = torch.randn(B, hq, d, dtype=DTYPE, device=dev)
    od = torch.empty_like(qd)
    qv = torch.randn(B, G + 1, hq, d, dtype=DTYPE, device=dev)
    ov = torch.empty_like(qv)
    scores = torch.zeros(L, B, hkv, maxp, dtype=torch.float32, device=dev)
    rpi = torch.arange(B, device=dev)
    new_len = q_start + G + 1  # every draft accepted: the window completes no page unless ctx is page aligned

    def attention(with_scores, kind="max"):
        for li in range(L):
            p, (ids, cnt, _) = pools[li % copies], pages[li % copies]
            for _ in range(G):
                draft_decode(qd, p.store, ids, cnt, p.hot_k, p.hot_v, p.slot, hot_start, hot_len, sm, out=od)
            verify_attention(qv, p.store, p.table, q_start, p.hot_k, p.hot_v, p.slot, sm,
                                 scores=scores[li] if with_scores else None, out=ov, score_kind=kind)

    row = dict(model=name, L=L, hq=hq, hkv=hkv, head_dim=d, ctx=ctx, batch=B, page=P, gamma=G, pages_drafted=k,
               pool_copies=copies)
    row["base_ms"] = t(lambda: attention(False))
    row["scores_only_ms"] = t(lambda: attention(True))
    row["scores_lse_ms"] = t(lambda: attention(True, "lse"))  # --quantspec-page-score lse
    parts = [f"base {row['base_ms'] * 1e3:8.0f}us", f"+scores {_pct(row['scores_only_ms'], row['base_ms'])}",
             f"+lse scores {_pct(row['scores_lse_ms'], row['base_ms'])}"]
    row["policies"] = {}
    # the server's page table source: req_to_token (token slots, one row per slot) read with stride P
    rtt = torch.zeros((B, maxp * P), dtype=torch.int32, device=dev)
    rtt[:, ::P] = pools[0].table * P
    has_pages = torch.ones(B, dtype=torch.bool, device=dev)
    for pol_name in a.policies:
        view = PageScores.of(policy_cfg(a, pol_name), scores, lambda r: pools[0].table[r],
                             table_source=lambda: (rtt[:, ::P], P))
        pol = pagetable.POLICIES[view.cfg.draft_pages](view)

        def step(pol=pol):
            pol.after_verify(rpi, q_start, new_len)

        def next_round(pol=pol):
            pol.for_round(rpi, new_len, has_pages)

        def full(pol=pol):
            attention(True)
            pol.after_verify(rpi, q_start, new_len)
            pol.for_round(rpi, new_len, has_pages)

        r = dict(round_ms=t(full), select_ms=t(step), for_round_ms=t(next_round), host_ms=host_ms(step, dev),
                 for_round_host_ms=host_ms(next_round, dev))
        _, _, want = page_counts(new_len // P, maxp, a.ratio, a.min_pages, a.sink_pages, pol.kcap)
        if not bool((pol.count == want.view(1, -1)).all()):  # the graph replays really selected
            raise RuntimeError(f"{pol_name}: selected {pol.count.unique().tolist()} pages, expected {want.tolist()}")
        r["overhead"] = (r["round_ms"] - row["base_ms"]) / r["round_ms"]
        row["policies"][pol_name] = r
        parts.append(f"{pol_name} {r['round_ms'] * 1e3:.0f}us overhead {r['overhead']:+.1%} (select "
                     f"{r['select_ms'] * 1e3:.0f}us + for_round {r['for_round_ms'] * 1e3:.0f}us, eager host "
                     f"{r['host_ms'] * 1e3:.0f}+{r['for_round_host_ms'] * 1e3:.0f}us)")
    line = f"{name:10s} ctx={ctx:>6} B={B:>2} k={k:>3} | " + " | ".join(parts)
    return row, line


def _pct(x, base):
    return f"{(x - base) / x:+.1%}"


def main(argv=None):
    a = parse_args(argv)
    t = timer(a)
    import triton

    res = dict(**common.run_meta(a.device), torch=torch.__version__,
               triton=triton.__version__, timing="cuda_graph_replay (do_bench median, cold L2)" if a.device == "cuda"
               else "cpu wall clock (smoke: says nothing about the GPU)",
               settings=dict(gamma=a.gamma, page=a.page, ratio=a.ratio, min_pages=a.min_pages,
                             sink_pages=a.sink_pages, policies=a.policies),
               note="attention-only rounds (no MLP/projections/sampling/host): overhead is an upper bound of the "
                    "share in a full model round; criterion: overhead <= 6%", rows=[], skipped=[])
    print(f"[selection] {res['device']} torch {torch.__version__} triton {triton.__version__}; round = L x (γ={a.gamma} "
          f"draft_decode + verify_attention(γ+1)); overhead = (policy round - base) / policy round. Attention only: "
          f"an UPPER BOUND of the share in a full model round (MLPs etc. excluded)", flush=True)
    gen = torch.Generator().manual_seed(0)
    for name in a.models:
        m = dict(MODELS[name], L=2) if a.smoke else MODELS[name]  # smoke: 2 layers (reference kernels are slow)
        for B in a.batch:
            for ctx in a.ctx:
                if time.time() - T0 > a.time_budget_s:
                    res["skipped"].append(dict(model=name, ctx=ctx, batch=B, reason="time budget"))
                    print(f"{name:10s} ctx={ctx:>6} B={B:>2} | SKIP: --time-budget-s", flush=True)
                    continue
                try:
                    row, line = run_config(a, name, m, ctx, B, t, gen)
                except torch.OutOfMemoryError as e:
                    res["skipped"].append(dict(model=name, ctx=ctx, batch=B, reason=f"OOM {str(e)[:80]}"))
                    print(f"{name:10s} ctx={ctx:>6} B={B:>2} | SKIP: out of memory", flush=True)
                    continue
                finally:
                    gc.collect()
                    if a.device == "cuda":
                        torch.cuda.empty_cache()
                res["rows"].append(row)
                print(line, flush=True)
                a.out.parent.mkdir(parents=True, exist_ok=True)
                common.write_json(a.out, res)
    worst = {p: max((r["policies"][p]["overhead"] for r in res["rows"]), default=None) for p in a.policies}
    res["worst_overhead"] = worst
    a.out.parent.mkdir(parents=True, exist_ok=True)
    common.write_json(a.out, res)
    for p, w in worst.items():
        if w is not None:
            print(f"[criterion] {p}: worst overhead {w:.1%} over {len(res['rows'])} configurations -> "
                  f"{'PASS' if w <= 0.06 else 'FAIL'} (<= 6% of an attention-only round; an upper bound)")
    print(f"[done] {time.time() - T0:.0f}s -> {a.out}")


if __name__ == "__main__":
    main()
