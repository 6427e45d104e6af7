"""draft_decode's split rule (sgl_spec/kernels/draft_decode/launch.py): shapes only, so it runs on the CPU. The counts asserted for
H100 shapes (132 SMs, 4 programs an SM)."""
import pytest
import triton

from sgl_spec.kernels.draft_decode.launch import _makespan, num_splits_for

SMS, PPS = 132, 4


@pytest.mark.parametrize("batch,hkv,maxp,want", [
    # short (sparse) lists: the makespan model. pycode-30m (Hkv = 2), the server's 7% list width of 18 pages
    (32, 2, 18, 6),  # wave rule: 8 splits, 2 of them empty, hot programs in a second wave
    (64, 2, 18, 3),  # wave rule: 4 (26.0 -> 24.9 us at 15k x 64 in the s17 A/B, 17 pages)
    (128, 2, 18, 2),  # one split would be faster only for short lists (4k: 5 pages -> 1 split)
    (128, 2, 5, 1),
    (1, 8, 144, 48),  # Llama-3-8B 128k x 1, 7%: 66 splits of which 18 were empty (21.3 -> 18.9 us)
    # long (dense) lists: the wave rule, only lowered to the splits a full list fills (same pages a split)
    (1, 8, 2048, 64),
    (8, 8, 4096, 33),
    (32, 8, 4096, 2),
])
def test_split_counts(batch, hkv, maxp, want):
    assert num_splits_for(batch, hkv, maxp, SMS, PPS) == want


@pytest.mark.parametrize("batch,hkv", [(1, 8), (8, 8), (32, 2), (64, 2), (128, 2), (1, 2), (17, 4)])
@pytest.mark.parametrize("maxp", [1, 5, 17, 18, 36, 144, 287, 2048])
def test_no_empty_splits_for_a_full_list(batch, hkv, maxp):
    """Every split of a full list gets pages: cdiv(maxp, ns) pages a split fill exactly ns splits."""
    ns = num_splits_for(batch, hkv, maxp, SMS, PPS)
    per = triton.cdiv(maxp, ns)
    assert 1 <= ns <= maxp and triton.cdiv(maxp, per) == ns and (ns - 1) * per < maxp


def test_makespan_model():
    # everything fits one wave: the longest page program
    assert _makespan(64, 18, 6, 528) == 4 + 3
    # 15k x 64: 4 splits put 112 page programs behind the 128 hot ones, 3 splits fit one wave
    assert _makespan(128, 18, 4, 528) == 3 + 4 + 5
    assert _makespan(128, 18, 3, 528) == 4 + 6
    # more programs than slots: the rounds add up
    assert _makespan(256, 18, 18, 528) > _makespan(256, 18, 2, 528)


def test_degenerate_shapes():
    assert num_splits_for(1, 1, 0, SMS, PPS) == 1
    assert num_splits_for(1, 1, 1, SMS, PPS) == 1
    assert num_splits_for(4096, 8, 18, SMS, PPS) >= 1  # more (request, head) pairs than slots
    assert num_splits_for(3, 2, 18, 8, 4) >= 1  # interpreter SM count


def _ring_for(batch, hkv, ctx, page):
    """draft_decode's choice for the Gluon page programs (H100: 132 SMs): the ring's slots (0: registers) and the
    sub-pages a split of the launch it then makes (the split count of that form's programs an SM)."""
    from sgl_spec.kernels.draft_decode.launch import gluon_programs_per_sm, gluon_stream_stages

    sub_pages = ctx // page * (page // 64)
    ring = gluon_stream_stages(page, batch, hkv, sub_pages, SMS)
    return ring, triton.cdiv(sub_pages, num_splits_for(batch, hkv, sub_pages, SMS, gluon_programs_per_sm(ring)))


@pytest.mark.parametrize("batch,ctx,page,want", [
    # Llama-3-8B (Hkv = 8) dense drafts: the ring below 64 pairs
    # where a split holds 17+ sub-pages (256k x 1: 113.8 -> 107.6 us), registers where it holds fewer (128k x 1)
    (1, 262144, 128, 2), (2, 131072, 128, 2), (4, 131072, 128, 2), (4, 65536, 128, 2),
    (1, 131072, 128, 0), (1, 65536, 128, 0), (2, 65536, 128, 0),
    (8, 8192, 128, 2), (8, 65536, 128, 2),  # 64 pairs: the ring whatever the split
    # P = 64: the split rule alone, at any batch: the ring where a
    # split holds 17+ sub-pages (256k x 1: 92.0 -> 88.8 us, 64k x 8: 174.5 -> 164.1), registers where fewer (8k x 8)
    (1, 262144, 64, 2), (4, 131072, 64, 2), (8, 32768, 64, 2), (8, 65536, 64, 2), (32, 65536, 64, 2),
    (1, 131072, 64, 0), (1, 65536, 64, 0), (8, 8192, 64, 0),
])
def test_ring_rule(batch, ctx, page, want):
    assert _ring_for(batch, 8, ctx, page)[0] == want


@pytest.mark.parametrize("page", [64, 128])
@pytest.mark.parametrize("batch", [1, 2, 4, 7])
@pytest.mark.parametrize("ctx", [4096, 16384, 65536, 131072, 262144, 1 << 20])
def test_ring_never_beside_fused_hot_programs(batch, ctx, page):
    """Below GLUON_HOT_MIN_PAIRS pairs the hot-token programs join the page launch for splits in
    GLUON_FUSED_HOT_PAGES; with them the ring form takes 186 registers (11 programs an SM, not the 12 its split count
    assumes), so the rule takes the ring there only past that range."""
    from sgl_spec.kernels.draft_decode.launch import GLUON_FUSED_HOT_PAGES, GLUON_HOT_MIN_PAIRS

    ring, per = _ring_for(batch, 8, ctx, page)
    if ring and batch * 8 < GLUON_HOT_MIN_PAIRS:
        assert per > GLUON_FUSED_HOT_PAGES[page][1]


def test_ring_rule_short_lists():
    """7% drafts (select_topk_pages lists) at 64+ pairs: the ring at P = 128 (the pair rule), registers at P = 64 where
    a split holds fewer than 17 sub-pages (H200: 64k x 32's 72-page lists 63.2 us in registers, 69.5 in the ring)."""
    from sgl_spec.kernels.draft_decode.launch import gluon_stream_stages

    assert gluon_stream_stages(64, 32, 8, 72, SMS) == 0 and gluon_stream_stages(64, 8, 8, 144, SMS) == 0
    assert gluon_stream_stages(128, 32, 8, 72, SMS) == 2


def test_ring_rule_explicit_stages():
    from sgl_spec.kernels.draft_decode.launch import gluon_stream_stages

    assert gluon_stream_stages(64, 1, 8, 64, SMS, 3) == 3 and gluon_stream_stages(128, 64, 8, 4096, SMS, 0) == 0
    with pytest.raises(ValueError, match="stages must be 0"):
        gluon_stream_stages(128, 1, 8, 4096, SMS, 1)
    # fixed split counts decide the split length the rule reads: 4096 sub-pages in 64 splits (64 each) or 4096 (1)
    assert gluon_stream_stages(128, 1, 8, 4096, SMS, num_splits=64) == 2
    assert gluon_stream_stages(128, 1, 8, 4096, SMS, num_splits=4096) == 0


def test_hot_last_rule():
    """The hot-token launch after the page launch where the ring runs, before it where a page is prefetched in
    registers (batch 1 at 64k / 128k: slower there), never with fused hot programs; a DraftLaunch's hot_last wins
    except with fused hot programs (there is no hot-token launch to move)."""
    from sgl_spec.kernels.draft_decode import launch as dl

    assert dl.gluon_hot_last(2, False) and dl.gluon_hot_last(3, False)
    assert not dl.gluon_hot_last(0, False) and not dl.gluon_hot_last(2, True)
    assert dl.gluon_hot_last(0, False, True) and not dl.gluon_hot_last(2, False, False)
    assert not dl.gluon_hot_last(2, True, True)