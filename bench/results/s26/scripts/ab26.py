"""Session 26: A/B (alternating, graph replays after a read flush, medians) of module knobs at batch 1 and 8:
verify (Gluon 32 splits / rule, Triton): MERGE_EARLY, MERGE_EAGER_LOADS; drafts: GLUON_MERGE_EARLY."""
import sys, statistics, torch
sys.path[:0] = ["bench"]
from kernel_cases import HQ, HKV, D, DTYPE, SM_SCALE, quant_pages, verify_q_start, draft_args
from l2_timer import L2Flush, bench_ms
from sgl_spec.kernels import verify_attention as va
from sgl_spec.kernels import draft_decode as dd
fl = L2Flush("read")
def graph_of(f):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream()); g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        f(); f(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            f()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize(); return g
def with_knobs(fn, mod, knobs):
    def call():
        old = {k: getattr(mod, k) for k in knobs}
        for k, v in knobs.items(): setattr(mod, k, v)
        try: fn()
        finally:
            for k, v in old.items(): setattr(mod, k, v)
    return call
def ab(label, variants, reps=3):
    gs = [(n, graph_of(f)) for n, f in variants]
    res = {n: [] for n, _ in gs}
    for _ in range(reps):
        for n, g in gs:
            res[n].append(bench_ms(g.replay, fl) * 1e3)
    print(f"{label} | " + " | ".join(f"{n} {statistics.median(v):.1f}" for n, v in res.items()), flush=True)
cells = [tuple(int(x) for x in c.split(":")) for c in sys.argv[1].split(",")]
for ctx, B in cells:
    nq = 5
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    q = torch.randn(B, nq, HQ, D, device="cuda", dtype=DTYPE); out = torch.empty_like(q)
    sc = torch.zeros(B, HKV, qb.page_table.shape[1], device="cuda")
    qs = verify_q_start(qb, nq)
    for eng, kw in (("gluon", dict(engine="gluon", **({"num_splits": 32} if B == 1 else {}))), ("triton", {})):
        if eng == "triton" and B > 1:
            continue
        f = lambda kw=kw: va.verify_attention(q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE,
                                              scores=sc, out=out, batch_invariant=False, **kw)
        ab(f"verify {ctx // 1024}k x {B} {eng}{' ns32' if B == 1 and eng == 'gluon' else ''}",
           [("base", with_knobs(f, va, dict(MERGE_EARLY=False, MERGE_EAGER_LOADS=False))),
            ("eager", with_knobs(f, va, dict(MERGE_EARLY=False, MERGE_EAGER_LOADS=True))),
            ("early", with_knobs(f, va, dict(MERGE_EARLY=True, MERGE_EAGER_LOADS=False))),
            ("both", with_knobs(f, va, dict(MERGE_EARLY=True, MERGE_EAGER_LOADS=True)))])
    qd = torch.randn(B, HQ, D, device="cuda", dtype=DTYPE); od = torch.empty(B, HQ, D, device="cuda", dtype=DTYPE)
    for label, sparse in (("dense", None), ("sparse7", (0.07, 1, 1))):
        ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=torch.Generator().manual_seed(2))
        f = lambda ids=ids, cnt=cnt, hs=hs, hl=hl: dd.draft_decode(qd, qb.store, ids, cnt, qb.hot_k, qb.hot_v,
                                                                   qb.hot_slot, hs, hl, SM_SCALE, out=od, engine="gluon")
        ab(f"draft {label} {ctx // 1024}k x {B}", [("base", with_knobs(f, dd, dict(GLUON_MERGE_EARLY=False))),
                                                   ("early", with_knobs(f, dd, dict(GLUON_MERGE_EARLY=True)))])
    qb = None; torch.cuda.empty_cache()
