"""Session 27: the Gluon draft page programs with the key scales folded into q (draft_decode.GLUON_QP, "qp") against
the package's dequantized keys ("base"): error of each against the reference (bench's draft reference on the same
pages), alternating graph replays after a read flush, medians of 5. Cells ctx:B:kind[:HQ:HKV] (d dense, s 7%)."""
import sys, statistics, torch
sys.path[:0] = ["bench"]
import kernel_cases as kc
from kernel_cases import D, DTYPE, SM_SCALE, quant_pages, draft_args
from l2_timer import L2Flush, bench_ms
from sgl_spec.kernels import draft_decode as dd
from sgl_spec.kernels.draft_decode_ref import draft_decode as ref
fl = L2Flush("read")
def graph_of(f):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream()); g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        f(); f(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            f()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize(); return g
for c in sys.argv[1].split(","):
    f = c.split(":")
    ctx, B, kind = int(f[0]), int(f[1]), f[2]
    HQ, HKV = (int(f[3]), int(f[4])) if len(f) > 3 else (kc.HQ, kc.HKV)
    kc.HQ, kc.HKV = HQ, HKV
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    qd = torch.randn(B, HQ, D, device="cuda", dtype=DTYPE)
    ids, n, hs, hl = draft_args(qb, sparse=(0.07, 1, 1) if kind == "s" else None, gen=torch.Generator().manual_seed(2))
    args = (qd, qb.store, ids, n, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE)
    want = ref(*args).float()
    gs, outs = {}, {}
    for k, on in (("base", False), ("qp", True)):
        outs[k] = torch.full((B, HQ, D), float("nan"), device="cuda", dtype=DTYPE)
        dd.GLUON_QP = on
        gs[k] = graph_of(lambda o=outs[k]: dd.draft_decode(*args, out=o, engine="gluon"))
    dd.GLUON_QP = False
    for g in gs.values():
        fl(); g.replay()
    torch.cuda.synchronize()
    err = {k: ((o.float() - want).norm() / want.norm()).item() for k, o in outs.items()}
    res = {k: [] for k in gs}
    for _ in range(5):
        for k, g in gs.items():
            res[k].append(bench_ms(g.replay, fl) * 1e3)
    print(f"draft {'sparse7' if kind == 's' else 'dense'} {ctx // 1024}k x {B} heads {HQ}:{HKV} | rel err vs ref base "
          f"{err['base']:.2e} qp {err['qp']:.2e} finite {bool(torch.isfinite(outs['qp']).all())} | "
          + " | ".join(f"{k} {statistics.median(v):.2f} ({min(v):.1f}-{max(v):.1f})" for k, v in res.items()),
          flush=True)
    qb = None; torch.cuda.empty_cache()
