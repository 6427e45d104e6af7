"""The draft's hot-token launch after the Gluon page launch (draft_decode ``hot_last``, draft_launch.GLUON_HOT_LAST)
on the GPU: the same outputs, bit for bit, as with the launch before it (the same partials, merged the same way),
within tolerance of the reference, and the query's own K/V written into its NaN-poisoned ring row either way; over
odd shapes, both page sizes, the ring (2 and 3 slots) and the register form, one split and the rule's."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from gpu_cases import NewTokenCase, _close, _kernels  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_hot_last_equals_hot_first(B, ctx, P):
    tri, _ = _kernels("draft_decode")
    case = NewTokenCase(B, ctx, P, B * 6151 + ctx * 13 + P)
    for kw in (dict(stages=2), dict(stages=3), dict(stages=2, num_splits=1), dict(stages=0)):
        got = {}
        for last in (False, True):
            case.poison()
            out = torch.full_like(case.args[0], float("nan"))
            tri(*case.args, out=out, engine="gluon", fused_hot=False, hot_last=last, new_k=case.new_k,
                new_v=case.new_v, **kw)
            assert case.ring_written(), (kw, last)
            got[last] = out
        _close(got[True], case.want)
        assert torch.equal(got[True], got[False]), kw  # the same partials merged the same way: the same bits
