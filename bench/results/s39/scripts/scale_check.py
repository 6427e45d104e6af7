"""Session 39: the packed scale layout gives bit-equal outputs to the split one (draft: Gluon ring and registers;
verify: copy warp and cp.async), P = 64 / 128."""
import sys
sys.path[:0] = ["bench"]
import torch
import kernel_cases as kc
from kernel_cases import quant_pages, draft_args, verify_q_start, relayout_scales, SM_SCALE, DTYPE
from sgl_spec.kernels.draft_decode import draft_decode
from sgl_spec.kernels.verify_attention import verify_attention
from sgl_spec.kernels import verify_gluon_rules as vgr

ok = True
gen = torch.Generator().manual_seed(0)
for P in (64, 128):
    lens = [4097, 63 * 64 + 5, 9000]
    qb = quant_pages(lens, P, "cuda", copies=1, gen=gen)[0]
    packed = relayout_scales(qb.store, "packed")
    B = len(lens)
    ids, cnt, hs, hl = draft_args(qb, gen=gen)
    q = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
    for stages in (0, 2):
        outs = [draft_decode(q, st, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE, engine="gluon",
                             stages=stages) for st in (qb.store, packed)]
        eq = torch.equal(outs[0], outs[1])
        ok &= eq
        print(f"draft P={P} stages={stages} bit-equal={eq} finite={bool(outs[0].isfinite().all())}")
    for nq in (1, 5):
        qv = torch.randn(B, nq, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
        qs = verify_q_start(qb, nq)
        for cw in (True, False):
            vgr.COPY_WARP = cw
            res = []
            for st in (qb.store, packed):
                sc = torch.full((B, kc.HKV, qb.page_table.shape[1]), float("nan"), device="cuda")
                o = verify_attention(qv, st, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE, scores=sc,
                                     engine="gluon", batch_invariant=False)
                res.append((o, sc))
            eq = torch.equal(res[0][0], res[1][0]) and torch.equal(res[0][1].nan_to_num(-7), res[1][1].nan_to_num(-7))
            ok &= eq
            print(f"verify P={P} nq={nq} cw={cw} bit-equal={eq} finite={bool(res[0][0].isfinite().all())}")
vgr.COPY_WARP = True
print("ALL OK" if ok else "MISMATCH")
