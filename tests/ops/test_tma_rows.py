"""Paged planes and scales as TMA rows (sgl_spec/kernels/common/tma_rows.py) and the descriptors the draft ring's TMA copies take
(sgl_spec/kernels/draft_decode/gluon_stream.py tma_args): which tensors can be addressed so, and that row p * rows-a-page + h *
rows-a-head + i of the row view holds page p, head h's i-th row, for contiguous tensors, the packed scale layout
(four views of one buffer) and every-other-page views."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from kernel_cases import relayout_scales  # noqa: E402

from sgl_spec.kernels.common.tma_rows import as_rows, row_strides, rows_ok  # noqa: E402
from sgl_spec.kvcache.format import KVFormat, PageStore  # noqa: E402


def _filled(P, H=3, pages=5):
    st = KVFormat(P, H, 128).alloc(pages)
    g = torch.Generator().manual_seed(P)
    for t in (st.k_upper, st.v_upper):
        t.copy_(torch.randint(0, 256, t.shape, generator=g, dtype=torch.uint8))
    for t in (st.k_scale, st.k_zero, st.v_scale, st.v_zero):
        t.copy_(torch.randn(t.shape, generator=g))
    return st


def _check_rows(t, width):
    assert rows_ok(t, width)
    rows, (rp, rh) = as_rows(t, width), row_strides(t, width)
    for p in range(t.shape[0]):
        for h in range(t.shape[1]):
            want = t[p, h].reshape(-1, width)
            got = rows[p * rp + h * rh: p * rp + h * rh + want.shape[0]]
            assert torch.equal(got, want), (p, h)


@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("layout", ["split", "packed", "every_other_page"])
def test_rows_address_every_page_and_head(P, layout):
    st = _filled(P, pages=6)
    if layout == "packed":
        st = relayout_scales(st, "packed")
    if layout == "every_other_page":
        st = PageStore(*(t[::2] for t in (st.k_upper, st.k_lower, st.v_upper, st.v_lower, st.k_scale, st.k_zero,
                                           st.v_scale, st.v_zero)))
    _check_rows(st.k_upper.view(torch.int32), 16)  # token rows of 16 words
    for t in (st.k_scale.view(torch.int32), st.k_zero.view(torch.int32)):  # one row of 64 words a (page, head)
        _check_rows(t, 64)
    for t in (st.v_scale, st.v_zero):  # P / 64 rows of 64 value scales a (page, head)
        _check_rows(t, 64)


def test_rows_refuse_what_tma_cannot_address():
    buf = torch.zeros(4, 2, 64 + 32, dtype=torch.float16)
    assert not rows_ok(buf[..., :64], 64)  # heads 96 elements apart: not whole rows
    assert not rows_ok(buf[..., 32:96], 64) and rows_ok(torch.zeros(4, 2, 128, dtype=torch.float16)[..., 64:], 64)
    assert not rows_ok(torch.zeros(4, 2, 64, dtype=torch.float16)[..., ::2], 32)  # strided last dim
    assert not rows_ok(torch.zeros(4, 2, 64, dtype=torch.float16), 4)  # rows of 8 bytes: below TMA's 16


def test_draft_ring_tma_args():
    pytest.importorskip("triton.experimental.gluon")
    from sgl_spec.kernels.draft_decode.gluon_stream import tma_args

    for P in (64, 128):
        for st in (_filled(P, H=8), relayout_scales(_filled(P, H=8), "packed")):
            ku, vu = st.k_upper.view(torch.int32), st.v_upper.view(torch.int32)
            a = tma_args(ku, vu, st.k_scale.view(torch.int32), st.k_zero.view(torch.int32), st.v_scale, st.v_zero)
            assert a["TMA"] is True and (a["rk_p"], a["rk_h"]) == (8 * P, P)
            width = st.k_scale.stride(1) // 2  # scale words a (page, head) as stored: 64 split, more when packed
            assert (a["rs_p"], a["rs_h"]) == (8 * width // 64, width // 64)
            assert (a["rv_p"], a["rv_h"]) == (st.v_scale.stride(0) // 64, st.v_scale.stride(1) // 64)
    st = _filled(64, H=8)
    odd = torch.zeros(st.v_scale.shape[0], 8, 96, dtype=torch.float16)[..., :64]  # heads not whole rows apart
    assert tma_args(st.k_upper.view(torch.int32), st.v_upper.view(torch.int32), st.k_scale.view(torch.int32),
                    st.k_zero.view(torch.int32), odd, odd) is None  # the cp.async ring then
