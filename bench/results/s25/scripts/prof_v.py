"""Verify (Gluon, server partition, nq 5, scores on) timeline: per-kernel start/end from torch.profiler over graph
replays after a read flush, and per-program start/end (%globaltimer) + SM from an instrumented copy (.work/vg/tl.py)."""
import sys, statistics, collections, importlib.util, torch
sys.path[:0] = ["bench"]
from kernel_cases import HQ, HKV, D, DTYPE, SM_SCALE, quant_pages, verify_q_start
from l2_timer import L2Flush, bench_ms
from sgl_spec.kernels import verify_attention as va
from sgl_spec.kernels import verify_pages_gluon as vg
from torch.profiler import profile, ProfilerActivity
print(torch.cuda.get_device_name(), flush=True)
spec = importlib.util.spec_from_file_location("tl", ".work/vg/tl.py"); tl = importlib.util.module_from_spec(spec); spec.loader.exec_module(tl)
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
cells = [tuple(int(x) for x in c.split(":")) for c in (sys.argv[1] if len(sys.argv) > 1 else "65536:8,131072:8,131072:32,262144:8").split(",")]
for ctx, B in cells:
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    nq = 5
    q = torch.randn(B, nq, HQ, D, device="cuda", dtype=DTYPE); out = torch.empty_like(q)
    sc = torch.zeros(B, HKV, qb.page_table.shape[1], device="cuda")
    qs = verify_q_start(qb, nq)
    fn = lambda: va.verify_attention(q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE,
                                     scores=sc, out=out, batch_invariant=False, engine="gluon")
    g = graph_of(fn)
    t = bench_ms(g.replay, fl) * 1e3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(12):
            fl(); g.replay()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type.name == "CUDA"]
    ev.sort(key=lambda e: e.time_range.start)
    rounds, cur = [], None
    for e in ev:
        nm = e.name.lower()
        if ("reduce" in nm or "max" in nm) and "verify" not in nm and "merge" not in nm:
            cur = {"flush_end": e.time_range.end, "k": []}; rounds.append(cur)
        elif cur is not None and "memset" not in nm:
            cur["k"].append(e)
    rows = collections.defaultdict(list)
    for r in rounds[2:]:
        if not r["k"]: continue
        t0 = r["k"][0].time_range.start
        for i, e in enumerate(r["k"]):
            rows[(i, e.name[:50])].append((e.time_range.start - t0, e.time_range.end - t0))
        rows[(-1, "flush end -> first kernel")].append((r["flush_end"] - t0, 0))
    print(f"== verify nq5 scores {ctx // 1024}k x {B}: bench_ms {t:.1f}us", flush=True)
    for k, v in sorted(rows.items()):
        print(f"   {k[1]:50s} start {statistics.median(x[0] for x in v):7.1f} end {statistics.median(x[1] for x in v):7.1f}")
    # instrumented page programs
    saved = vg.launch_pages; vg.launch_pages = tl.launch_pages
    try:
        g2 = graph_of(fn)
        t2 = bench_ms(g2.replay, fl) * 1e3
        stats = collections.defaultdict(list)
        for rep in range(5):
            fl(); g2.replay(); torch.cuda.synchronize()
            n = tl.TL["n"]; a = tl.TL["buf"][: n * 4].view(n, 4).cpu()
            st, en, sm = a[:, 0], a[:, 1], a[:, 2]
            t0 = int(st.min())
            s_us = [(int(x) - t0) / 1e3 for x in st]; e_us = [(int(x) - t0) / 1e3 for x in en]
            per_sm = collections.Counter(int(x) for x in sm)
            stats["n"].append(n); stats["sms"].append(len(per_sm))
            stats["occ"].append(dict(collections.Counter(per_sm.values())))
            for p in (0, 0.5, 1.0):
                stats[f"start p{int(p*100)}"].append(pct(s_us, p))
            for p in (0, 0.1, 0.5, 0.9, 1.0):
                stats[f"end p{int(p*100)}"].append(pct(e_us, p))
            dur = [e - s for s, e in zip(s_us, e_us)]
            for p in (0, 0.5, 1.0):
                stats[f"dur p{int(p*100)}"].append(pct(dur, p))
            one = [e for e, m in zip(e_us, sm) if per_sm[int(m)] == 1]; two = [e for e, m in zip(e_us, sm) if per_sm[int(m)] >= 2]
            if one: stats["end med (1 on SM)"].append(statistics.median(one))
            if two: stats["end med (2+ on SM)"].append(statistics.median(two))
        print(f"   instrumented: bench_ms {t2:.1f}us programs {stats['n'][0]} SMs used {stats['sms']} occupancy {stats['occ'][0]}")
        print("   " + " | ".join(f"{k} {statistics.median(v):.1f}" for k, v in stats.items() if k not in ('n', 'sms', 'occ')), flush=True)
    finally:
        vg.launch_pages = saved
    qb = None; torch.cuda.empty_cache()
