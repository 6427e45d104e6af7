"""Session 26: draft GLUON_MERGE_EARLY A/B, alternating, 5 reps (graph replays after a read flush, medians)."""
import sys, statistics, torch
sys.path[:0] = ["bench"]
from kernel_cases import HQ, HKV, D, DTYPE, SM_SCALE, quant_pages, draft_args
from l2_timer import L2Flush, bench_ms
from sgl_spec.kernels import draft_decode as dd
fl = L2Flush("read")
def graph_of(f):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream()); g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        f(); f(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            f()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize(); return g
def knob(fn, v):
    def call():
        old = dd.GLUON_MERGE_EARLY; dd.GLUON_MERGE_EARLY = v
        try: fn()
        finally: dd.GLUON_MERGE_EARLY = old
    return call
for c in sys.argv[1].split(","):
    ctx, B = (int(x) for x in c.split(":"))
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    qd = torch.randn(B, HQ, D, device="cuda", dtype=DTYPE); od = torch.empty(B, HQ, D, device="cuda", dtype=DTYPE)
    for label, sparse in (("dense", None), ("sparse7", (0.07, 1, 1))):
        ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=torch.Generator().manual_seed(2))
        f = lambda ids=ids, cnt=cnt, hs=hs, hl=hl: dd.draft_decode(qd, qb.store, ids, cnt, qb.hot_k, qb.hot_v,
                                                                   qb.hot_slot, hs, hl, SM_SCALE, out=od, engine="gluon")
        gs = {"base": graph_of(knob(f, False)), "early": graph_of(knob(f, True))}
        res = {k: [] for k in gs}
        for _ in range(5):
            for k, g in gs.items():
                res[k].append(bench_ms(g.replay, fl) * 1e3)
        print(f"draft {label} {ctx // 1024}k x {B} | " + " | ".join(f"{k} {statistics.median(v):.2f} ({min(v):.1f}-{max(v):.1f})" for k, v in res.items()), flush=True)
    qb = None; torch.cuda.empty_cache()
