"""Dynamic group claiming (.work/vg/clr27.py) against the reference and the package's Gluon page programs: output
error against verify_attention_ref (the dev check's metric), page scores equal to the package kernel's, and the
claim counters: every participating program claims 2 + (groups it ran), so each pair's counter must end at
2 n_eff + n_groups when every group ran exactly once."""
import sys, importlib.util, torch
sys.path[:0] = ["bench"]
from kernel_cases import HQ, HKV, D, DTYPE, SM_SCALE, quant_pages, verify_q_start
from sgl_spec.kernels import verify_attention as va
from sgl_spec.kernels import verify_pages_gluon as vg
from sgl_spec.kernels.verify_attention_ref import verify_attention as ref
spec = importlib.util.spec_from_file_location("clr27", ".work/vg/clr27.py"); dyn = importlib.util.module_from_spec(spec); spec.loader.exec_module(dyn)
gen = torch.Generator().manual_seed(3)
ok_all = True
for lens in ([4097], [197, 9, 128, 639], [65536] * 2, [131072, 5000, 70000, 64 * 300 + 17], [16384] * 8):
    toks = [(torch.randn(n, HKV, D, generator=gen).to("cuda", DTYPE) * 2 + torch.randn(1, HKV, D, generator=gen).to("cuda", DTYPE) * 3,
             torch.randn(n, HKV, D, generator=gen).to("cuda", DTYPE)) for n in lens]
    qb = quant_pages(lens, 64, "cuda", tokens=toks, gen=gen)[0]
    for nq in (1, 5):
        B = len(lens)
        q = torch.randn(B, nq, HQ, D, generator=gen).to("cuda", DTYPE)
        qs = verify_q_start(qb, nq)
        args = (q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE)
        sc_ref = torch.full((B, HKV, qb.page_table.shape[1]), float("nan"), device="cuda")
        want = ref(*args, scores=sc_ref, out=torch.empty(q.shape, device="cuda"))
        def run(mod):
            out = torch.full_like(q, float("nan")); sc = torch.full_like(sc_ref, float("nan"))
            saved = vg.launch_pages; vg.launch_pages = mod.launch_pages
            try:
                va.verify_attention(*args, scores=sc, out=out, batch_invariant=False, engine="gluon")
            finally:
                vg.launch_pages = saved
            torch.cuda.synchronize(); return out, sc
        o0, s0 = run(vg)
        e0 = ((o0.float() - want).norm() / want.norm()).item()
        for rep in range(2):
            o1, s1 = run(dyn)
            e1 = ((o1.float() - want).norm() / want.norm()).item()
            same_sc = torch.equal(torch.nan_to_num(s0, nan=-7.0), torch.nan_to_num(s1, nan=-7.0))
            cnt_ok = int(dyn.DBG['cnt'].abs().sum()) == 0
            good = e1 < 1e-2 and abs(e1 - e0) < 0.5 * e0 + 1e-4 and same_sc and cnt_ok and not torch.isnan(o1).any()
            ok_all &= good
            print(f"lens {lens[:4]} nq {nq} rep {rep}: err vs ref static {e0:.2e} dyn {e1:.2e} scores equal {same_sc} "
                  f"counters {'back to 0' if cnt_ok else 'NOT 0 ' + str(dyn.DBG['cnt'].cpu().tolist()[:8])} -> {'ok' if good else 'FAIL'}", flush=True)
    qb = None; torch.cuda.empty_cache()
print("ALL OK" if ok_all else "SOME FAILED")
