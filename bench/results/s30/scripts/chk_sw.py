"""verify_attention(engine="gluon") with 25..32 rows as 16 + 16 columns (SPLIT_ROWS_WIDE) against the reference,
with and without the ring program, scores on (GPU)."""
import sys
import torch
sys.path[:0] = ["bench", "tests/gpu"]
import kernel_cases  # noqa: F401 (bootstrap)
import test_kernels_gpu as t
from sgl_spec.kernels import verify_pages_gluon as vg
from sgl_spec.kernels.verify_attention import verify_attention as tri
from sgl_spec.kernels.verify_attention_ref import verify_attention as ref

vg.SPLIT_ROWS_WIDE = True
assert vg.row_tiles(32, 4) == (16, 16) and vg.row_tiles(28, 4) == (16, 16)
n = 0
for B, ctx, P, nq in [(1, 4097, 64, 8), (3, 4097, 64, 8), (1, 63, 64, 8), (17, 4097, 64, 7), (1, 4097, 128, 8)]:
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq)
    bt = t.Batch(t._lens(B, ctx, nq, gen), P, gen)
    q = torch.randn(B, nq, t.HQ, t.D, generator=gen).to("cuda", torch.bfloat16)
    q_start = bt.i32([x - nq for x in bt.lens])
    args = (q, bt.store, bt.page_table, q_start, bt.hot_k, bt.hot_v, bt.hot_slot, t.SM)
    sc_ref = torch.full((B, t.HKV, bt.maxp), float("nan"), device="cuda")
    want = ref(*args, scores=sc_ref)
    for fused in (False, True):
        sc = torch.full((B, t.HKV, bt.maxp), float("nan"), device="cuda")
        out = torch.full_like(q, float("nan"))
        tri(*args, scores=sc, out=out, engine="gluon", batch_invariant=False, fused_ring=fused)
        t._close(out, want)
        for b, s0 in enumerate((q_start // P).tolist()):
            t._close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)
        n += 1
print(f"chk_sw: {n} cases ok (16 + 16 columns, ring launch and ring program, vs reference)")
