"""The draft page programs' ring with TMA copies (sgl_spec/kernels/draft_decode/gluon_stream.py ``TMA``, draft_launch.GLUON_STREAM_TMA)
on the GPU: the same outputs, bit for bit, as the cp.async ring (the same math on the same bytes), both within
tolerance of the reference, over odd shapes, both page sizes, both partitions, 2 and 3 slots, and with the scales
and zeros as views of one buffer (addressed as TMA rows: sgl_spec/kernels/common/tma_rows.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from gpu_cases import HQ, SM, D, Batch, _close, _kernels, _lens  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from kernel_cases import relayout_scales  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_tma_ring_equals_cp_async_ring(B, ctx, P):
    tri, ref = _kernels("draft_decode")
    gen = torch.Generator().manual_seed(B * 7907 + ctx * 11 + P)
    bt = Batch(_lens(B, ctx, 1, gen), P, gen)
    p = [n - 1 for n in bt.lens]
    nq = [x // P for x in p]
    hot_start = [m * P for m in nq]
    hot_len = [x - s + 1 for x, s in zip(p, hot_start)]
    q = torch.randn(B, HQ, D, generator=gen).to("cuda", torch.bfloat16)
    rest = (bt.page_table, bt.i32(nq), bt.hot_k, bt.hot_v, bt.hot_slot, bt.i32(hot_start), bt.i32(hot_len), SM)
    want = ref(q, bt.store, *rest)
    for store in (bt.store, relayout_scales(bt.store, "packed")):
        for kw in (dict(stages=2), dict(stages=2, split_stride=False), dict(stages=3, num_splits=1),
                   dict(stages=2, num_splits=1)):
            got = {}
            for tma in (False, True):
                out = torch.full_like(q, float("nan"))
                tri(q, store, *rest, out=out, engine="gluon", stream_tma=tma, **kw)
                got[tma] = out
            _close(got[True], want)
            assert torch.equal(got[True], got[False]), kw  # the same math on the same bytes: the same bits
