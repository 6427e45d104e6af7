"""The copy-warp form of the Gluon verify page programs (sgl_spec/kernels/verify_attention/gluon_copy_warp.py, verify_gluon_rules.COPY_WARP)
on the GPU: the same outputs and page scores, bit for bit, as the cp.async form (the same math on the same bytes), and
both against the reference, over odd shapes, both page sizes, both partitions and both score kinds."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from gpu_cases import HKV, _close, _kernels, verify_window  # noqa: E402

pytestmark = pytest.mark.gpu


def _run(tri, args, q, bt, B, **kw):
    sc = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
    out = torch.full_like(q, float("nan"))
    tri(*args, scores=sc, out=out, engine="gluon", **kw)
    return out, sc


@pytest.mark.parametrize("nq", [1, 5, 8])
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_copy_warp_form_equals_cp_async_form(B, ctx, P, nq, monkeypatch):
    from sgl_spec.kernels.verify_attention import gluon_rules as vgr

    tri, ref = _kernels("verify_attention")
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq + 37)
    nq = min(nq, ctx)
    bt, q, q_start, args = verify_window(B, ctx, P, nq, gen)
    for kind in ("max", "lse"):
        sc_ref = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
        want = ref(*args, scores=sc_ref, score_kind=kind)
        for invariant in (False, True):
            got = {}
            for cw in (False, True):
                monkeypatch.setattr(vgr, "COPY_WARP", cw)
                got[cw] = _run(tri, args, q, bt, B, batch_invariant=invariant, score_kind=kind)
            out, sc = got[True]
            _close(out, want)
            for b, s0 in enumerate((q_start // P).tolist()):  # entries j >= q_start // P stay unwritten (contract)
                _close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)
            assert torch.equal(out, got[False][0])  # the same math on the same bytes: the same bits
            assert torch.equal(sc.nan_to_num(-7.0), got[False][1].nan_to_num(-7.0))
