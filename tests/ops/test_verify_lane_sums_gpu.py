"""The Gluon verify page loop with its running sums kept per lane (verify_gluon_rules.LANE_SUMS, ``_probs(LANE)``) on
the GPU: against the reference, and against the per-warp sums (the same terms added in another order: outputs equal
within fp32 rounding, page scores bit-equal, since the page maxima do not change), in both the cp.async and the
copy-warp forms, over odd shapes, both page sizes and both partitions; and each row of a window bit-equal to a one-row
call at its position (the per-lane sums of a column depend on that column alone)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from gpu_cases import HKV, _close, _kernels, verify_window  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("cw", [False, True])
@pytest.mark.parametrize("nq", [1, 5, 8])
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_lane_sums(B, ctx, P, nq, cw, monkeypatch):
    from sgl_spec.kernels.verify_attention import gluon_rules as vgr

    tri, ref = _kernels("verify_attention")
    monkeypatch.setattr(vgr, "COPY_WARP", cw)
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq + 41)
    nq = min(nq, ctx)
    bt, q, q_start, args = verify_window(B, ctx, P, nq, gen)
    sc_ref = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
    want = ref(*args, scores=sc_ref)
    for invariant in (False, True):
        got = {}
        for lane in (False, True):
            monkeypatch.setattr(vgr, "LANE_SUMS", lane)
            sc = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
            out = torch.full_like(q, float("nan"))
            tri(*args, scores=sc, out=out, engine="gluon", batch_invariant=invariant)
            got[lane] = out, sc
        out, sc = got[True]
        _close(out, want)
        for b, s0 in enumerate((q_start // P).tolist()):  # entries j >= q_start // P stay unwritten (contract)
            _close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)
        # the same terms summed in another order: fp32 rounding only (outputs are bf16: 2^-8 relative at most)
        torch.testing.assert_close(out.float(), got[False][0].float(), atol=1e-3, rtol=8e-3)
        assert torch.equal(sc.nan_to_num(-7.0), got[False][1].nan_to_num(-7.0))  # page maxima untouched
        if invariant:  # each row as a one-row call at its position: the same bits
            for i in range(nq):
                one = torch.full_like(q[:, i:i + 1], float("nan"))
                tri(q[:, i:i + 1].contiguous(), *args[1:3], q_start + i, *args[4:], out=one, engine="gluon",
                    batch_invariant=True)
                assert torch.equal(one[:, 0], out[:, i])
