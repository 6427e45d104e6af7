"""Session 26 B: per-program start / end / SM of the B=1 Gluon page programs (verify ns 32, drafts), raw dumps to $OUT
for a per-SM analysis; summary percentiles printed."""
import sys, os, statistics, collections, importlib.util, torch
sys.path[:0] = ["bench"]
from kernel_cases import HQ, HKV, D, DTYPE, SM_SCALE, quant_pages, verify_q_start, draft_args
from l2_timer import L2Flush, bench_ms
from sgl_spec.kernels import verify_attention as va
from sgl_spec.kernels import verify_pages_gluon as vg
from sgl_spec.kernels import draft_pages_gluon as dpg
from sgl_spec.kernels.draft_decode import draft_decode
OUT = os.environ.get("OUT", "/tmp")
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
tlv = load("tlv", ".work/vg/tl26.py"); tld = load("tld", ".work/vg/tl26d.py")
fl = L2Flush("read")
BUF = torch.zeros(1 << 16, dtype=torch.int64, device="cuda")
class W:
    def __init__(self, k): self.k = k
    def __getitem__(self, grid):
        n = grid[0] * grid[1]; BUF_N[0] = n
        return lambda *a, **kw: self.k[grid](*a, tl_ptr=BUF, **kw)
BUF_N = [0]
def graph_of(f):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream()); g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        f(); f(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            f()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize(); return g
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]
def dump(g, buf_fn, tag):
    reps = []
    for rep in range(6):
        fl(); g.replay(); torch.cuda.synchronize()
        n, buf = buf_fn()
        reps.append(buf[: n * 4].view(n, 4).cpu().clone())
    torch.save(reps, f"{OUT}/{tag}.pt")
    a = reps[-1]; t0 = int(a[:, 0].min())
    dur = (a[:, 1] - a[:, 0]).double() / 1e3
    work = dur > 1.0
    e = ((a[:, 1] - t0).double() / 1e3)[work].tolist(); s = ((a[:, 0] - t0).double() / 1e3)[work].tolist()
    return (f"working {int(work.sum())} start p50/p100 {pct(s, .5):.1f}/{pct(s, 1):.1f} end p0/p10/p50/p90/p100 "
            + "/".join(f"{pct(e, p):.1f}" for p in (0, .1, .5, .9, 1)))
for ctx in (65536, 131072):
    B, nq = 1, 5
    qb = quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    q = torch.randn(B, nq, HQ, D, device="cuda", dtype=DTYPE); out = torch.empty_like(q)
    sc = torch.zeros(B, HKV, qb.page_table.shape[1], device="cuda")
    qs = verify_q_start(qb, nq)
    fn = lambda: va.verify_attention(q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE,
                                     scores=sc, out=out, batch_invariant=False, engine="gluon", num_splits=32)
    saved = vg.launch_pages; vg.launch_pages = tlv.launch_pages
    try:
        g = graph_of(fn); t = bench_ms(g.replay, fl) * 1e3
        print(f"verify {ctx//1024}k x 1 ns32 instrumented {t:.1f}us: {dump(g, lambda: (tlv.TL['n'], tlv.TL['buf']), f'v{ctx//1024}k')}", flush=True)
    finally:
        vg.launch_pages = saved
    qd = torch.randn(B, HQ, D, device="cuda", dtype=DTYPE); od = torch.empty(B, HQ, D, device="cuda", dtype=DTYPE)
    for label, sparse in (("dense", None), ("sparse7", (0.07, 1, 1))):
        ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=torch.Generator().manual_seed(2))
        fn = lambda: draft_decode(qd, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE, out=od,
                                  engine="gluon")
        saved = dpg._draft_pages_kernel; dpg._draft_pages_kernel = W(tld._draft_pages_kernel)
        try:
            g = graph_of(fn); t = bench_ms(g.replay, fl) * 1e3
            print(f"draft {label} {ctx//1024}k x 1 instrumented {t:.1f}us: {dump(g, lambda: (BUF_N[0], BUF), f'd{label}{ctx//1024}k')}", flush=True)
        finally:
            dpg._draft_pages_kernel = saved
    qb = None; torch.cuda.empty_cache()
