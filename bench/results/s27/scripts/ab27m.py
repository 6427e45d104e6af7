"""Session 27: the draft merge released at the start of the Gluon page launch (draft_launch.MERGE_EARLY_FILL = 1: every
launch; 0: never) per cell: alternating graph replays after a read flush, medians of 5; outputs must be bit-equal."""
import sys, statistics, torch
sys.path[:0] = ["bench"]
from kernel_cases import HQ, HKV, D, DTYPE, SM_SCALE, quant_pages, draft_args
from l2_timer import L2Flush, bench_ms
from sgl_spec.kernels import draft_decode as dd, draft_launch as dl
fl = L2Flush("read")
def graph_of(f):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream()); g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        f(); f(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            f()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize(); return g
for c in sys.argv[1].split(","):
    ctx, B, kind = c.split(":")
    ctx, B = int(ctx), int(B)
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    qd = torch.randn(B, HQ, D, device="cuda", dtype=DTYPE)
    ids, n, hs, hl = draft_args(qb, sparse=(0.07, 1, 1) if kind == "s" else None, gen=torch.Generator().manual_seed(2))
    gs, outs = {}, {}
    for k, fill in (("never", 0.0), ("early", 1.0)):
        outs[k] = torch.empty(B, HQ, D, device="cuda", dtype=DTYPE)
        dl.MERGE_EARLY_FILL = fill
        gs[k] = graph_of(lambda o=outs[k]: dd.draft_decode(qd, qb.store, ids, n, qb.hot_k, qb.hot_v, qb.hot_slot, hs,
                                                            hl, SM_SCALE, out=o, engine="gluon"))
    dl.MERGE_EARLY_FILL = 0.0
    for g in gs.values():
        fl(); g.replay()
    torch.cuda.synchronize()
    same = torch.equal(outs["never"], outs["early"])
    ns = dd.num_splits_for(B, HKV, ids.shape[1], dl._sm_count(qd.device), dd.GLUON_PROGRAMS_PER_SM, 1)
    res = {k: [] for k in gs}
    for _ in range(5):
        for k, g in gs.items():
            res[k].append(bench_ms(g.replay, fl) * 1e3)
    print(f"draft {'sparse7' if kind == 's' else 'dense'} {ctx // 1024}k x {B} ({ns * B * HKV} page warps) bit-equal "
          f"{same} | " + " | ".join(f"{k} {statistics.median(v):.2f} ({min(v):.1f}-{max(v):.1f})"
                                    for k, v in res.items()), flush=True)
    qb = None; torch.cuda.empty_cache()
