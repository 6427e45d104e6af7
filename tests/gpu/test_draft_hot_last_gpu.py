"""The draft's hot-token launch after the Gluon page launch (draft_decode ``hot_last``, draft_launch.GLUON_HOT_LAST)
on the GPU: the same outputs, bit for bit, as with the launch before it (the same partials, merged the same way),
within tolerance of the reference, and the query's own K/V written into its NaN-poisoned ring row either way; over
odd shapes, both page sizes, the ring (2 and 3 slots) and the register form, one split and the rule's."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from gpu_cases import HKV, HQ, SM, D, Batch, _close, _kernels, _lens  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_hot_last_equals_hot_first(B, ctx, P):
    from sgl_spec.kernels.draft_hot import RING

    tri, ref = _kernels("draft_decode")
    gen = torch.Generator().manual_seed(B * 6151 + ctx * 13 + P)
    bt = Batch(_lens(B, ctx, 1, gen), P, gen)
    p = [n - 1 for n in bt.lens]
    nq = [max(0, x // P - 1) for x in p]  # up to 2P hot tokens: the ring's older page read too
    hot_start = [m * P for m in nq]
    hot_len = [x - s + 1 for x, s in zip(p, hot_start)]
    q = torch.randn(B, HQ, D, generator=gen).to("cuda", torch.bfloat16)
    new = torch.randn(B, HQ + 2 * HKV, D, generator=gen).to("cuda", torch.bfloat16)
    new_k, new_v = new[:, HQ:HQ + HKV], new[:, HQ + HKV:]
    rows = (bt.hot_slot.long(), torch.tensor([(x // P) % RING for x in p], device="cuda"), torch.tensor(
        [x % P for x in p], device="cuda"))
    args = (q, bt.store, bt.page_table, bt.i32(nq), bt.hot_k, bt.hot_v, bt.hot_slot, bt.i32(hot_start),
            bt.i32(hot_len), SM)
    bt.hot_k[rows] = float("nan")
    bt.hot_v[rows] = float("nan")
    rk, rv = bt.hot_k.clone(), bt.hot_v.clone()
    want = ref(q, bt.store, bt.page_table, bt.i32(nq), rk, rv, *args[6:], new_k=new_k, new_v=new_v)
    assert not want.isnan().any()
    for kw in (dict(stages=2), dict(stages=3), dict(stages=2, num_splits=1), dict(stages=0)):
        got = {}
        for last in (False, True):
            bt.hot_k[rows] = float("nan")
            bt.hot_v[rows] = float("nan")
            out = torch.full_like(q, float("nan"))
            tri(*args, out=out, engine="gluon", fused_hot=False, hot_last=last, new_k=new_k, new_v=new_v, **kw)
            assert torch.equal(bt.hot_k, rk) and torch.equal(bt.hot_v, rv), (kw, last)
            got[last] = out
        _close(got[True], want)
        assert torch.equal(got[True], got[False]), kw  # the same partials merged the same way: the same bits
