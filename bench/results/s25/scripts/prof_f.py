"""Does a small kernel before the verify launches change its time? Timeline (torch.profiler, graph replays after a
read flush) of: gluon fixed splits, gluon claimed groups (its counters' zero fill is a kernel), gluon fixed splits
after a dummy zero fill, Triton, Triton after a dummy zero fill."""
import sys, statistics, collections, torch
sys.path[:0] = ["bench"]
from kernel_cases import HQ, HKV, D, DTYPE, SM_SCALE, quant_pages, verify_q_start
from l2_timer import L2Flush, bench_ms
from sgl_spec.kernels import verify_attention as va
from sgl_spec.kernels import verify_pages_gluon as vg
from torch.profiler import profile, ProfilerActivity
fl = L2Flush("read")
def graph_of(f):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream()); g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        f(); f(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            f()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize(); return g
def timeline(g):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(12):
            fl(); g.replay()
        torch.cuda.synchronize()
    ev = sorted([e for e in prof.events() if e.device_type.name == "CUDA"], key=lambda e: e.time_range.start)
    rounds, cur = [], None
    for e in ev:
        nm = e.name.lower()
        if ("reduce" in nm or "max" in nm) and "verify" not in nm and "merge" not in nm:
            cur = {"end": e.time_range.end, "k": []}; rounds.append(cur)
        elif cur is not None:
            cur["k"].append(e)
    rows = collections.defaultdict(list)
    for r in rounds[2:]:
        if not r["k"]: continue
        t0 = r["end"]
        for i, e in enumerate(r["k"]):
            rows[(i, e.name[:28])].append((e.time_range.start - t0, e.time_range.end - t0))
    return " | ".join(f"{k[1]} {statistics.median(x[0] for x in v):.1f}-{statistics.median(x[1] for x in v):.1f}"
                      for k, v in sorted(rows.items()))
for c in (sys.argv[1] if len(sys.argv) > 1 else "65536:8,131072:1").split(","):
    ctx, B = (int(x) for x in c.split(":"))
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    q = torch.randn(B, 5, HQ, D, device="cuda", dtype=DTYPE); out = torch.empty_like(q)
    sc = torch.zeros(B, HKV, qb.page_table.shape[1], device="cuda")
    qs = verify_q_start(qb, 5)
    def mk(eng, dyn, fill):
        def fn():
            if fill:
                torch.zeros(64, dtype=torch.int32, device="cuda")
            saved = vg.DYNAMIC_GROUPS; vg.DYNAMIC_GROUPS = dyn
            try:
                va.verify_attention(q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE,
                                    scores=sc, out=out, batch_invariant=False, engine=eng)
            finally:
                vg.DYNAMIC_GROUPS = saved
        return fn
    for name, eng, dyn, fill in (("gluon fixed", "gluon", False, False), ("gluon claimed", "gluon", True, False),
                                 ("gluon fixed + fill", "gluon", False, True), ("gluon claimed + fill", "gluon", True, True),
                                 ("triton", "triton", False, False), ("triton + fill", "triton", False, True),
                                 ("gluon fixed", "gluon", False, False)):
        g = graph_of(mk(eng, dyn, fill))
        t = bench_ms(g.replay, fl) * 1e3
        print(f"{ctx // 1024}k x {B} {name:22s}: {t:7.1f}us | from flush end: {timeline(g)}", flush=True)
    qb = None; torch.cuda.empty_cache()
