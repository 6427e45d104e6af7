"""dev diag (session 37): SM clock / power while a kernel replays back to back (nvidia-smi sampled by the caller).
Each phase: 4 s of graph replays, printing its wall window and the mean µs a replay."""
import sys, time
sys.path[:0] = ['bench']
import torch
import kernel_cases as kc
from kernel_cases import quant_pages, verify_q_start, D, DTYPE, SM_SCALE
import dev_verify
from dev_timing import _TIMING
_TIMING["gluon_dir"] = ".work/vg"

def graph(fn):
    fn(); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g

def phase(name, g, secs=4.0):
    t0 = time.time(); n = 0
    torch.cuda.synchronize()
    e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    while time.time() - t0 < secs:
        for _ in range(50):
            g.replay()
        n += 50
        torch.cuda.synchronize()
    e1.record(); torch.cuda.synchronize()
    print(f"phase {name} {t0:.3f}-{time.time():.3f} n={n} {e0.elapsed_time(e1) * 1e3 / n:.1f}us/replay", flush=True)

gen = torch.Generator().manual_seed(1)
ctx, B, P = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
qb = quant_pages([ctx] * B, P, "cuda", gen=gen)[0]
q = torch.randn(B, 5, kc.HQ, D, device="cuda", dtype=DTYPE)
out = torch.empty_like(q)
sc = torch.zeros(B, kc.HKV, qb.page_table.shape[1], device="cuda")
qs = verify_q_start(qb, 5)
for var in sys.argv[4:]:
    if var == "fa3":
        from kernel_baselines import load_fa3, fa3_attention
        from kernel_cases import bf16_pages
        cache = bf16_pages([ctx] * B, P, "cuda", gen=gen)[0]
        run = fa3_attention(load_fa3()[0], cache, 5)
        g = graph(lambda: run(q))
    elif var == "draft":
        from kernel_cases import draft_args
        from sgl_spec.kernels.draft_decode import draft_decode
        ids, cnt, hs, hl = draft_args(qb, gen=gen)
        q1 = torch.randn(B, kc.HQ, D, device="cuda", dtype=DTYPE)
        o1 = torch.empty_like(q1)
        g = graph(lambda: draft_decode(q1, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE,
                                       out=o1, engine="gluon"))
    elif var == "copy":
        src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(0, 256); dst = torch.empty_like(src)
        g = graph(lambda: dst.copy_(src))
    elif var in ("zero", "zk", "zv", "zq", "zl"):  # the same kernel on all-zero planes and scales / key planes / ...
        st = qb.store
        ts = dict(zero=(st.k_upper, st.k_lower, st.v_upper, st.v_lower, st.k_scale, st.k_zero, st.v_scale, st.v_zero),
                  zk=(st.k_upper, st.k_lower), zv=(st.v_upper, st.v_lower), zq=(q,), zl=(st.k_lower, st.v_lower))[var]
        for t in ts:
            t.zero_()
        impl, _, kw = dev_verify.verify_variant("bf/gl=1")
        g = graph(lambda: impl(q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE, scores=sc,
                               out=out, **kw))
    else:
        impl, _, kw = dev_verify.verify_variant(var)
        g = graph(lambda: impl(q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE, scores=sc,
                               out=out, **kw))
    time.sleep(1.0)
    phase(var, g)
