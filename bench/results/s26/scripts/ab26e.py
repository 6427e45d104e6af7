"""Session 26: draft split count (one full wave of strided splits) and hot-launch order A/B, alternating, 5 reps."""
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
        old = dd.HOT_ORDER; dd.HOT_ORDER = v
        try: fn()
        finally: dd.HOT_ORDER = old
    return call
for c in sys.argv[1].split(","):
    ctx, B, kinds = c.split(":")
    ctx, B = int(ctx), int(B)
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    qd = torch.randn(B, HQ, D, device="cuda", dtype=DTYPE); od = torch.empty(B, HQ, D, device="cuda", dtype=DTYPE)
    for label, sparse in (("dense", None), ("sparse7", (0.07, 1, 1))):
        if label[0] not in kinds:
            continue
        ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=torch.Generator().manual_seed(2))
        def f(ns=None, ids=ids, cnt=cnt, hs=hs, hl=hl):
            dd.draft_decode(qd, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE, out=od,
                            engine="gluon", num_splits=ns)
        vs = {"base": knob(f, "early"), "last": knob(f, "last")}
        if label == "dense" and B == 1:
            nsw = 1056 // HKV
            vs.update({f"ns{nsw}": knob(lambda: f(nsw), "early"), f"last+ns{nsw}": knob(lambda: f(nsw), "last")})
        gs = {k: graph_of(v) for k, v in vs.items()}
        res = {k: [] for k in gs}
        for _ in range(5):
            for k, g in gs.items():
                res[k].append(bench_ms(g.replay, fl) * 1e3)
        print(f"draft {label} {ctx // 1024}k x {B} | " + " | ".join(f"{k} {statistics.median(v):.2f} ({min(v):.1f}-{max(v):.1f})" for k, v in res.items()), flush=True)
    qb = None; torch.cuda.empty_cache()
