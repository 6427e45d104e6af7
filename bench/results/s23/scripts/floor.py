"""Probe: per-call time of a draft launch (a) as bench_ms times it (flush, then one graph replay between events) and
(b) inside one graph of K (flush, call) pairs minus one graph of K flushes (graph launch amortized over K)."""
import statistics, sys, torch
sys.path.insert(0, "bench")
from kernel_cases import HQ, D, DTYPE, SM_SCALE, draft_args, quant_pages
from l2_timer import L2Flush, bench_ms
from sgl_spec.kernels.draft_decode import draft_decode
print(torch.cuda.get_device_name(), flush=True)
fl = L2Flush("read")
K = 10

def graph_of(fns):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        for f in fns: f()
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            for f in fns: f()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
    return g

def replay_ms(g, n=30):
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)

x = torch.zeros(1, device="cuda")
g0 = graph_of([lambda: x.add_(1)])
print(f"tiny kernel graph: bench_ms {bench_ms(g0.replay, fl) * 1e3:.1f}us", flush=True)
gf = graph_of([fl] * K)
tf = replay_ms(gf)
for ctx, sparse in ((8192, None), (65536, None), (131072, None), (262144, None), (131072, (0.07, 1, 1))):
    qb = quant_pages([ctx], 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
    ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=torch.Generator().manual_seed(1))
    q = torch.randn(1, HQ, D, device="cuda", dtype=DTYPE); out = torch.empty_like(q)
    fn = lambda: draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE, out=out)
    g1 = graph_of([fn])
    a = bench_ms(g1.replay, fl) * 1e3
    gk = graph_of([f for _ in range(K) for f in (fl, fn)])
    b = (replay_ms(gk) - tf) / K * 1e3
    b2 = (replay_ms(gk) - replay_ms(gf)) / K * 1e3
    print(f"draft {'sparse' if sparse else 'dense'} {ctx // 1024}k x 1: bench_ms {a:.1f}us | in-graph {b:.1f} / {b2:.1f}us", flush=True)
    qb = None; torch.cuda.empty_cache()
