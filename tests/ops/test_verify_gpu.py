"""Real-shape correctness of verify_attention against its pure-torch twin, on the GPU: the Triton kernel, the Gluon
page programs with both ring launches and orders, and long windows (split out of test_kernels_gpu.py). Shapes,
poisoning and tolerances: gpu_cases.py. Outputs are poisoned with NaN so an unwritten element fails."""
import sys
from pathlib import Path

import pytest
import torch

from gpu_cases import HKV, HQ, D, SM, Batch, _close, _kernels, verify_window  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [1, 63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
@pytest.mark.parametrize("nq", [5, 8])
def test_verify_attention(B, ctx, P, nq):
    tri, ref = _kernels("verify_attention")
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq)
    nq = min(nq, ctx)
    bt, q, q_start, args = verify_window(B, ctx, P, nq, gen)
    sc = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
    sc_ref = sc.clone()
    out = torch.full_like(q, float("nan"))
    tri(*args, scores=sc, out=out)
    want = ref(*args, scores=sc_ref)
    _close(out, want)
    for b, s0 in enumerate((q_start // P).tolist()):  # entries j >= q_start // P are left unwritten (contract)
        _close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)
    out2 = torch.full_like(q, float("nan"))
    tri(*args, out=out2)  # scores off: the same attention
    _close(out2, want)
    # scores on, with the server's default partition (batch_invariant=False: splits follow B) and with the keys
    # through shared memory (key_frag=False; the default keeps them in the wgmma A fragment's order at P = 64)
    for variant in (dict(batch_invariant=False), dict(key_frag=False)):
        sc = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
        out4 = torch.full_like(q, float("nan"))
        tri(*args, scores=sc, out=out4, **variant)
        _close(out4, want)
        for b, s0 in enumerate((q_start // P).tolist()):
            _close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)
    # --quantspec-page-score lse: page log-sum-exps (a column sum of the softmax weights), same attention output
    sc = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
    sc_ref = sc.clone()
    out3 = torch.full_like(q, float("nan"))
    tri(*args, scores=sc, out=out3, score_kind="lse")
    ref(*args, scores=sc_ref, score_kind="lse")
    _close(out3, want)
    for b, s0 in enumerate((q_start // P).tolist()):
        _close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)
    # the Gluon page programs (sgl_spec/kernels/verify_attention/gluon_pages.py; P = 128 as two 64-token sub-pages a page): both
    # partitions, one split, both score kinds
    for kw in (dict(), dict(batch_invariant=False), dict(num_splits=1), dict(score_kind="lse")):
        _check_gluon_verify(tri, ref, args, q, bt, B, P, q_start, want, **kw)


def _check_gluon_verify(tri, ref, args, q, bt, B, P, q_start, want, **kw):
    sc = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
    sc_ref = sc.clone()
    out = torch.full_like(q, float("nan"))
    tri(*args, scores=sc, out=out, engine="gluon", **kw)
    ref(*args, scores=sc_ref, score_kind=kw.get("score_kind", "max"))
    _close(out, want)
    for b, s0 in enumerate((q_start // P).tolist()):
        _close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)
    out = torch.full_like(q, float("nan"))
    tri(*args, out=out, engine="gluon", **kw)  # scores off
    _close(out, want)


@pytest.mark.parametrize("nq,G,dtype", [(1, 4, torch.bfloat16), (5, 4, torch.bfloat16), (8, 4, torch.bfloat16),
                                        (13, 2, torch.bfloat16), (5, 4, torch.float16)])
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [1, 63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_verify_gluon_ring_launch(B, ctx, P, nq, G, dtype):
    """engine="gluon" with the ring split as a Gluon launch (sgl_spec/kernels/verify_attention/gluon_ring.py; the rule's choice at
    batch 1, forced here at every batch) and as the Triton ring launch: both against the reference, with stale ring
    rows past the window poisoned (never loaded) and the page scores the same bits (the ring has none)."""
    tri, ref = _kernels("verify_attention")
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq + G)
    nq = min(nq, ctx)
    bt, q, q_start, args = verify_window(B, ctx, P, nq, gen, hq=G * HKV, dtype=dtype)
    sc_ref = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
    want = ref(*args, scores=sc_ref)
    scores = []
    for gluon_ring in (True, False):
        sc = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
        out = torch.full_like(q, float("nan"))
        tri(*args, scores=sc, out=out, engine="gluon", batch_invariant=False, gluon_ring=gluon_ring)
        _close(out, want)
        for b, s0 in enumerate((q_start // P).tolist()):
            _close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)
        scores.append(sc.nan_to_num(-7.0))
    assert torch.equal(scores[0], scores[1])


@pytest.mark.parametrize("order", ["early", "serial", "last"])
@pytest.mark.parametrize("lens", [[40000, 20001], [9000] * 5 + [300, 64 * 70 + 3]])
def test_verify_gluon_ring_order(lens, order, monkeypatch):
    """engine="gluon" with the ring launch before the page launch (released at once or at its end) or after it
    (verify_attention.RING_ORDER): every order against the reference, with both partitions, and the page scores (per
    page, not per program) the same bits whatever the order and partition."""
    from sgl_spec.kernels.verify_attention import triton as va

    tri, ref = _kernels("verify_attention")
    monkeypatch.setattr(va, "RING_ORDER", order)
    gen = torch.Generator().manual_seed(sum(lens))
    P, nq = 64, 5
    bt = Batch(lens, P, gen)
    q = torch.randn(len(lens), nq, HQ, D, generator=gen).to("cuda", torch.bfloat16)
    q_start = bt.i32([n - nq for n in bt.lens])
    args = (q, bt.store, bt.page_table, q_start, bt.hot_k, bt.hot_v, bt.hot_slot, SM)
    want = ref(*args, scores=torch.full((len(lens), HKV, bt.maxp), float("nan"), device="cuda"))
    scores = []
    for invariant in (True, False, False):
        sc = torch.full((len(lens), HKV, bt.maxp), float("nan"), device="cuda")
        out = torch.full_like(q, float("nan"))
        # gluon_ring=False: RING_ORDER places the Triton ring launch (batch-following launches default to the Gluon one)
        tri(*args, scores=sc, out=out, engine="gluon", batch_invariant=invariant, gluon_ring=False)
        _close(out, want)
        scores.append(sc.nan_to_num(-7.0))
    assert all(torch.equal(scores[0], x) for x in scores[1:])


@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
@pytest.mark.parametrize("nq", [9, 13, 16])
def test_verify_long_window(B, ctx, P, nq):
    """G = 2 (16 query heads over the 8 KV heads) with γ >= 8: the server's partition puts the window's NQ*2 rows in
    one 32-row tile (block_rows), the batch-invariant one in row blocks of 16; both against the reference."""
    tri, ref = _kernels("verify_attention")
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq + 1)
    bt, q, q_start, args = verify_window(B, ctx, P, nq, gen, hq=2 * HKV)
    sc_ref = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
    want = ref(*args, scores=sc_ref)
    for invariant in (False, True):
        for eng in ("triton", "gluon"):
            sc = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
            out = torch.full_like(q, float("nan"))
            tri(*args, scores=sc, out=out, batch_invariant=invariant, engine=eng)
            _close(out, want)
            for b, s0 in enumerate((q_start // P).tolist()):
                _close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)
