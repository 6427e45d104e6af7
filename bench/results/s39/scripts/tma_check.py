"""Session 39: the draft ring with TMA copies gives bit-equal outputs to the cp.async ring (and the register form
within rounding), P = 64 / 128, split / packed scales, contiguous and strided partitions."""
import sys
sys.path[:0] = ["bench"]
import torch
import kernel_cases as kc
from kernel_cases import quant_pages, draft_args, relayout_scales, SM_SCALE, DTYPE
from sgl_spec.kernels.draft_decode import draft_decode
from sgl_spec.kernels.draft_decode_ref import draft_decode as draft_decode_ref

ok = True
gen = torch.Generator().manual_seed(0)
for P in (64, 128):
    for lens in ([4097, 63 * 64 + 5, 9000], [70000]):
        qb = quant_pages(lens, P, "cuda", copies=1, gen=gen)[0]
        B = len(lens)
        ids, cnt, hs, hl = draft_args(qb, gen=gen)
        q = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
        for layout in ("split", "packed"):
            st = relayout_scales(qb.store, layout)
            for strided in (False, True):
                def run(tma, stages=2):
                    return draft_decode(q, st, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE,
                                        engine="gluon", stages=stages, stream_tma=tma, split_stride=strided)
                a, b, r = run(False), run(True), run(False, 0)
                eq = torch.equal(a, b)
                err = (b.float() - r.float()).abs().max().item()
                ok &= eq and err < 1e-2
                print(f"P={P} lens={lens} scales={layout} strided={strided}: tma==cp {eq}, |tma-registers| {err:.2e}")
        ref = draft_decode_ref(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE)
        b = draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE, engine="gluon",
                         stages=2, stream_tma=True)
        print(f"P={P} lens={lens}: |tma-ref| {(b.float() - ref.float()).abs().max().item():.2e}")
print("ALL OK" if ok else "MISMATCH")
