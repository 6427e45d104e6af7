"""Session 26: batch-1 timelines. Per-kernel start/end (torch.profiler over graph replays after a read flush, relative
to the flush's end) for the verify (Gluon by the rule, Gluon with 32 splits, Triton) and the drafts (dense 64k / 128k,
7% sparse 128k); per-program start/end of the Gluon page programs (instrumented copy .work/vg/tl26.py)."""
import sys, statistics, collections, importlib.util, torch
sys.path[:0] = ["bench"]
from kernel_cases import HQ, HKV, D, DTYPE, SM_SCALE, quant_pages, verify_q_start, draft_args
from l2_timer import L2Flush, bench_ms
from sgl_spec.kernels import verify_attention as va
from sgl_spec.kernels import verify_pages_gluon as vg
from sgl_spec.kernels.draft_decode import draft_decode
from torch.profiler import profile, ProfilerActivity
print(torch.cuda.get_device_name(), flush=True)
spec = importlib.util.spec_from_file_location("tl", ".work/vg/tl26.py"); tl = importlib.util.module_from_spec(spec); spec.loader.exec_module(tl)
fl = L2Flush("read")
def graph_of(f):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream()); g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        f(); f(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            f()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize(); return g
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]
def timeline(g):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(14):
            fl(); g.replay()
        torch.cuda.synchronize()
    ev = sorted([e for e in prof.events() if e.device_type.name == "CUDA"], key=lambda e: e.time_range.start)
    rounds, cur = [], None
    for e in ev:
        nm = e.name.lower()
        if ("reduce" in nm or "max" in nm) and "verify" not in nm and "merge" not in nm and "draft" not in nm:
            cur = {"end": e.time_range.end, "k": []}; rounds.append(cur)
        elif cur is not None and "memset" not in nm:
            cur["k"].append(e)
    rows = collections.defaultdict(list)
    for r in rounds[2:]:
        t0 = r["end"]
        for i, e in enumerate(r["k"]):
            rows[(i, e.name[:34])].append((e.time_range.start - t0, e.time_range.end - t0))
    return " | ".join(f"{k[1]} {statistics.median(x[0] for x in v):.1f}-{statistics.median(x[1] for x in v):.1f}"
                      for k, v in sorted(rows.items()))
def programs(g):
    st = collections.defaultdict(list)
    for rep in range(5):
        fl(); g.replay(); torch.cuda.synchronize()
        n = tl.TL["n"]; a = tl.TL["buf"][: n * 4].view(n, 4).cpu()
        s_, e_ = a[:, 0], a[:, 1]
        t0 = int(s_.min())
        dur = [(int(e) - int(s)) / 1e3 for s, e in zip(s_, e_)]
        work = [i for i in range(n) if dur[i] > 1.0]
        su = [(int(s_[i]) - t0) / 1e3 for i in work]; eu = [(int(e_[i]) - t0) / 1e3 for i in work]
        st["working"].append(len(work))
        for p in (0, 0.5, 1.0):
            st[f"start p{int(p*100)}"].append(pct(su, p))
        for p in (0, 0.1, 0.5, 0.9, 1.0):
            st[f"end p{int(p*100)}"].append(pct(eu, p))
    return " | ".join(f"{k} {statistics.median(v):.1f}" for k, v in st.items())
for ctx in (65536, 131072):
    B, nq = 1, 5
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    q = torch.randn(B, nq, HQ, D, device="cuda", dtype=DTYPE); out = torch.empty_like(q)
    sc = torch.zeros(B, HKV, qb.page_table.shape[1], device="cuda")
    qs = verify_q_start(qb, nq)
    for name, kw in (("gluon rule", dict(engine="gluon")), ("gluon ns32", dict(engine="gluon", num_splits=32)),
                     ("gluon ns31", dict(engine="gluon", num_splits=31)), ("triton", {})):
        fn = lambda kw=kw: va.verify_attention(q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE,
                                               scores=sc, out=out, batch_invariant=False, **kw)
        g = graph_of(fn)
        t = bench_ms(g.replay, fl) * 1e3
        print(f"verify {ctx // 1024}k x {B} {name}: {t:.1f}us | {timeline(g)}", flush=True)
        if "gluon" in name:
            saved = vg.launch_pages; vg.launch_pages = tl.launch_pages
            try:
                g2 = graph_of(fn)
                print(f"   programs ({bench_ms(g2.replay, fl) * 1e3:.1f}us instrumented): {programs(g2)}", flush=True)
            finally:
                vg.launch_pages = saved
    # drafts
    qd = torch.randn(B, HQ, D, device="cuda", dtype=DTYPE); od = torch.empty(B, HQ, D, device="cuda", dtype=DTYPE)
    for label, sparse in (("dense", None), ("sparse7", (0.07, 1, 1))):
        if label == "sparse7" and ctx != 131072:
            continue
        ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=torch.Generator().manual_seed(2))
        fn = lambda: draft_decode(qd, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE, out=od,
                                  engine="gluon")
        g = graph_of(fn)
        t = bench_ms(g.replay, fl) * 1e3
        print(f"draft {label} {ctx // 1024}k x {B}: {t:.1f}us | {timeline(g)}", flush=True)
    qb = None; torch.cuda.empty_cache()
