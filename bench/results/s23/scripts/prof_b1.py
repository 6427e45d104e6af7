"""Timeline of a batch-1 draft launch (Gluon engine, as the server runs it) and FA3-less: per-kernel start/end
relative to the first kernel, from torch.profiler (CUPTI) over graph replays each after a read flush."""
import sys, statistics, collections, torch
sys.path.insert(0, "bench")
from kernel_cases import HQ, D, DTYPE, SM_SCALE, draft_args, quant_pages
from l2_timer import L2Flush, bench_ms
from sgl_spec.kernels.draft_decode import draft_decode
from torch.profiler import profile, ProfilerActivity
print(torch.cuda.get_device_name(), flush=True)
fl = L2Flush("read")
def graph_of(f):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream()); g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        f(); f(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            f()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize(); return g
for ctx, sparse, B in ((131072, None, 1), (131072, (0.07, 1, 1), 1), (8192, None, 1), (262144, None, 1)):
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=torch.Generator().manual_seed(1))
    q = torch.randn(B, HQ, D, device="cuda", dtype=DTYPE); out = torch.empty_like(q)
    fn = lambda: draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE, out=out,
                              engine="gluon")
    g = graph_of(fn)
    t = bench_ms(g.replay, fl) * 1e3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            fl(); g.replay()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type.name == "CUDA"]
    ev.sort(key=lambda e: e.time_range.start)
    # group: each flush kernel starts a round
    rounds, cur = [], None
    for e in ev:
        if "reduce" in e.name.lower() or "amax" in e.name.lower() or "max" in e.name.lower() and "kernel" in e.name.lower() and "draft" not in e.name.lower():
            cur = {"flush_end": e.time_range.end, "k": []}; rounds.append(cur)
        elif cur is not None:
            cur["k"].append(e)
    prof_rows = collections.defaultdict(list)
    for r in rounds[2:]:
        if not r["k"]: continue
        t0 = r["k"][0].time_range.start
        for i, e in enumerate(r["k"]):
            prof_rows[(i, e.name[:60])].append((e.time_range.start - t0, e.time_range.end - t0))
        prof_rows[("gap", "flush end -> first kernel")].append((r["flush_end"] - t0, 0))
    print(f"== draft {'sparse' if sparse else 'dense'} {ctx // 1024}k x {B}: bench_ms {t:.1f}us, {len(rounds)} rounds", flush=True)
    for k, v in sorted(prof_rows.items(), key=lambda kv: statistics.median(x[0] for x in kv[1])):
        print(f"   {k[1]:60s} start {statistics.median(x[0] for x in v):7.1f} end {statistics.median(x[1] for x in v):7.1f}")
    qb = None; torch.cuda.empty_cache()
