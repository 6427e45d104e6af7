"""Session 26: dense drafts with list indices handed out by counters (draft_decode(claims=...)) against fixed strided
splits: correctness (close to the fixed form, counters back to 0) and alternating timing (graph replays, read flush)."""
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
cnt = torch.zeros(4096, dtype=torch.int32, device="cuda")
for c in sys.argv[1].split(","):
    ctx, B = (int(x) for x in c.split(":"))
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    qd = torch.randn(B, HQ, D, device="cuda", dtype=DTYPE)
    ids, n, hs, hl = draft_args(qb, sparse=None, gen=torch.Generator().manual_seed(2))
    outs = {k: torch.empty(B, HQ, D, device="cuda", dtype=DTYPE) for k in ("fixed", "claims")}
    fs = {"fixed": lambda: dd.draft_decode(qd, qb.store, ids, n, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE,
                                           out=outs["fixed"], engine="gluon"),
          "claims": lambda: dd.draft_decode(qd, qb.store, ids, n, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE,
                                            out=outs["claims"], engine="gluon", claims=cnt)}
    gs = {k: graph_of(f) for k, f in fs.items()}
    for g in gs.values():
        fl(); g.replay()
    torch.cuda.synchronize()
    a, b = outs["fixed"].float(), outs["claims"].float()
    err = ((a - b).abs().max() / a.abs().max()).item()
    print(f"check {ctx // 1024}k x {B}: claims vs fixed rel err {err:.2e} finite {bool(torch.isfinite(b).all())} "
          f"counters back to 0 {int(cnt.abs().sum())} == 0", flush=True)
    res = {k: [] for k in gs}
    for _ in range(3):
        for k, g in gs.items():
            res[k].append(bench_ms(g.replay, fl) * 1e3)
    print(f"draft dense {ctx // 1024}k x {B} | " + " | ".join(f"{k} {statistics.median(v):.2f} ({min(v):.1f}-{max(v):.1f})" for k, v in res.items()), flush=True)
    qb = None; torch.cuda.empty_cache()
