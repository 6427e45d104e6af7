"""Real-shape correctness of the Triton kernels against their pure-torch twins, on the GPU: draft_decode,
quantize_pages, select_topk_pages, norm_pair_linear (the verify's tests: test_verify_gpu.py). Shapes, poisoning and
tolerances: gpu_cases.py. Outputs are poisoned with NaN so an unwritten element fails."""
import math
import sys
from pathlib import Path

import pytest
import torch

from gpu_cases import HKV, HQ, D, SM, Batch, NewTokenCase, _close, _kernels, _lens  # noqa: E402

from sgl_spec.kvcache.format import KVFormat  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [1, 63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
@pytest.mark.parametrize("mode", ["dense", "dense_2hot", "sparse", "sparse_head"])
def test_draft_decode(B, ctx, P, mode):
    tri, ref = _kernels("draft_decode")
    gen = torch.Generator().manual_seed(B * 100003 + ctx * 7 + P)
    bt = Batch(_lens(B, ctx, 1, gen), P, gen)
    p = [n - 1 for n in bt.lens]
    nq = [x // P for x in p]
    if mode == "dense_2hot":  # the hot window starts one page early (that page is in the ring, not in the list)
        nq = [max(0, m - 1) for m in nq]
    hot_start = [m * P for m in nq]
    hot_len = [x - s + 1 for x, s in zip(p, hot_start)]
    ids = bt.page_table
    if mode.startswith("sparse"):  # sink page 0 + a random subset in random order: the kernel must not assume sorted ids
        heads = HKV if mode == "sparse_head" else 1  # sparse_head: one list per kv head, [B, Hkv, KCAP]
        rows = torch.zeros((B, heads, bt.page_table.shape[1]), dtype=bt.page_table.dtype)
        for b, m in enumerate(nq):
            if m == 0:
                rows[b] = bt.page_table[b, -1].item()
                continue
            k = min(m, max(1, math.ceil(0.3 * m)))
            for h in range(heads):
                pick = torch.cat([torch.zeros(1, dtype=torch.long),
                                  torch.randperm(m - 1, generator=gen)[: k - 1] + 1])[:k]
                pick = pick[torch.randperm(len(pick), generator=gen)]
                rows[b, h, :k] = bt.page_table[b, pick.to("cuda")].cpu()
                rows[b, h, k:] = bt.page_table[b, -1].item()  # past the list: the poison page
            nq[b] = k
        ids = (rows if heads > 1 else rows[:, 0]).contiguous().to("cuda")
    q = torch.randn(B, HQ, D, generator=gen).to("cuda", torch.bfloat16)
    args = (q, bt.store, ids, bt.i32(nq), bt.hot_k, bt.hot_v, bt.hot_slot, bt.i32(hot_start), bt.i32(hot_len), SM)
    out = torch.full_like(q, float("nan"))
    tri(*args, out=out)
    want = ref(*args)
    _close(out, want)
    out = torch.full_like(q, float("nan"))
    tri(*args, out=out, key_frag=False)  # keys through shared memory (the default kf is a no-op at P = 128)
    _close(out, want)
    # the Gluon page programs (sgl_spec/kernels/draft_decode/gluon_pages.py; P = 128 as two 64-token sub-pages a page); one split:
    # every page in one program; contiguous shares instead of strided splits; the pages through a shared-memory ring
    # of 2 / 3 slots (sgl_spec/kernels/draft_decode/gluon_stream.py) or prefetched in registers, whatever the launch rule picks
    for kw in (dict(), dict(num_splits=1), dict(split_stride=False), dict(stages=0), dict(stages=2),
               dict(stages=3, num_splits=1), dict(stages=2, split_stride=False)):
        out = torch.full_like(q, float("nan"))
        tri(*args, out=out, engine="gluon", merge_blocks=4, **kw)
        _close(out, want)


@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [1, 63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_draft_gluon_hot_programs_write_the_new_token(B, ctx, P):
    """engine="gluon": the hot-token programs run in the page launch (fused_hot, sgl_spec/kernels/draft_decode/gluon_hot.py) or as
    the Triton launch before it. With new_k / new_v each writes the query's own K/V into its (NaN-poisoned) ring row
    before reading it: the ring afterwards equals the reference's bit for bit, the output matches the reference's;
    the 2-hot-page window (the ring's older page read too) and one split included."""
    tri, _ = _kernels("draft_decode")
    case = NewTokenCase(B, ctx, P, B * 31 + ctx * 5 + P)
    for kw in (dict(fused_hot=True), dict(fused_hot=True, num_splits=1), dict(fused_hot=False),
               dict(fused_hot=True, stages=2)):
        case.poison()
        out = torch.full_like(case.args[0], float("nan"))
        tri(*case.args, out=out, engine="gluon", new_k=case.new_k, new_v=case.new_v, **kw)
        assert case.ring_written(), kw
        _close(out, case.want)


@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_quantize_pages(B, P):
    from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref

    tri, ref = _kernels("quantize_pages")
    gen = torch.Generator().manual_seed(B * 31 + P)
    T = (B + 1) * P + 5
    kv = torch.randn(T, 2, HKV, D, generator=gen).to("cuda", torch.bfloat16)  # fused K/V rows: row stride 2*HKV*D
    kv[:, 0] *= 4
    src_k, src_v = kv[:, 0], kv[:, 1]
    src_row = torch.randint(0, T - P + 1, (B,), generator=gen).to("cuda", torch.int64)  # unaligned rows
    npages = 2 * B + 3
    page_ids = torch.randperm(npages, generator=gen)[:B].to("cuda", torch.int32)
    fmt = KVFormat(P, HKV, D)
    got, want = fmt.alloc(npages, "cuda"), fmt.alloc(npages, "cuda")
    planes = ("k_upper", "k_lower", "v_upper", "v_lower")
    scales = ("k_scale", "k_zero", "v_scale", "v_zero")
    for n in planes:
        getattr(got, n).fill_(0xAB)
    for n in scales:
        getattr(got, n).fill_(float("nan"))
    tri(src_k, src_v, src_row, page_ids, got)
    ref(src_k, src_v, src_row, page_ids, want)
    ids = page_ids.long()
    other = torch.ones(npages, dtype=torch.bool, device="cuda")
    other[ids] = False
    for n in planes:
        assert (getattr(got, n)[other] == 0xAB).all(), f"{n}: wrote a page it was not asked to"
    for n in scales:
        assert torch.isnan(getattr(got, n)[other]).all(), f"{n}: wrote a page it was not asked to"
        # scale = fp16 round-up of (max - zero)/15: computing the quotient another way may move it by one fp16 ulp
        _close(getattr(got, n)[ids], getattr(want, n)[ids], atol=1e-6, rtol=2e-3)
    rows = src_row.view(-1, 1) + torch.arange(P, device="cuda")
    for pre, deq, src, sdim in (("k", dequant_keys_ref, src_k, -2), ("v", dequant_values_ref, src_v, -1)):
        g = deq(*(getattr(got, f"{pre}_{n}")[ids] for n in ("upper", "lower", "scale", "zero")), draft=False)
        w = deq(*(getattr(want, f"{pre}_{n}")[ids] for n in ("upper", "lower", "scale", "zero")), draft=False)
        s = getattr(want, f"{pre}_scale")[ids].float().unsqueeze(sdim)
        x = src[rows].float().permute(0, 2, 1, 3)
        # codes may differ by one INT8 step where (x - z)/s lands within float rounding of a rounding boundary
        assert ((g - w).abs() <= s / 16 * 1.01 + 1e-6).all()
        assert ((g - x).abs() <= s / 32 * 1.01 + 1e-5 * (x.abs() + 1)).all(), "outside the format's s/32 bound"
        for n in ("upper", "lower"):
            diff = (getattr(got, f"{pre}_{n}")[ids] != getattr(want, f"{pre}_{n}")[ids]).float().mean().item()
            assert diff <= 1e-3, f"{pre}_{n}: {diff:.3%} of bytes differ from the reference"


@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [1, 63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_select_topk_pages(B, ctx, P):
    tri, ref = _kernels("select_topk_pages")
    gen = torch.Generator().manual_seed(B * 17 + ctx + P)
    L = 32
    maxp = (ctx + P - 1) // P + 2
    n_full = (ctx - 1) // P
    elig = [n_full] + torch.randint(0, n_full + 1, (B - 1,), generator=gen).tolist()
    scores = torch.randn(L, B, HKV, maxp, generator=gen).to("cuda")
    page_table = torch.stack([torch.randperm(100_000, generator=gen)[:maxp] for _ in range(B)]).to("cuda", torch.int32)
    kcap = max(1, math.ceil(0.07 * n_full))  # below min_pages=4 for short lists: the clip to KCAP is exercised
    args = (scores, torch.tensor(elig, dtype=torch.int32, device="cuda"), page_table, 0.07, 4, 1)
    ids = torch.full((L, B, kcap), -7, dtype=torch.int32, device="cuda")
    cnt = torch.full((L, B), -1, dtype=torch.int32, device="cuda")
    tri(*args, out_ids=ids, out_count=cnt)
    ids_ref, cnt_ref = ref(*args, out_ids=torch.zeros_like(ids), out_count=torch.zeros_like(cnt))
    assert torch.equal(cnt, cnt_ref)
    assert torch.equal(ids, ids_ref)  # the rule (ascending logical order, ties to the lower page) is exact


@pytest.mark.parametrize("smoothing", ["none", "ema", "max"])
@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("B", [1, 17])
def test_select_topk_pages_policy_options(B, per_head, smoothing):
    """The draft page policies' launch (sgl_spec/pages/policies.py): req_to_token-like token table read by slot, token
    counts, unscored (completed) pages, a recent share, a score history, skipped rows; per layer or per kv head."""
    tri, ref = _kernels("select_topk_pages")
    gen = torch.Generator().manual_seed(B * 5 + per_head * 3 + len(smoothing))
    L, P, maxp, slots = 32, 64, 70, B + 5
    G = HKV if per_head else 1
    rows = torch.randperm(slots, generator=gen)[:B].to("cuda")
    new_len = torch.randint(1, maxp * P, (B,), generator=gen)
    new_len[0] = maxp * P - 3
    win = (new_len - torch.randint(1, 9, (B,), generator=gen)).clamp(min=0)  # some windows complete a page
    scores = torch.randn(L, B, HKV, maxp, generator=gen).to("cuda")
    rtt = torch.randint(0, 1 << 24, (slots, maxp * P), generator=gen).to("cuda", torch.int32)
    hist = torch.randn(L, slots, G, maxp, generator=gen).to("cuda")
    hist_n = torch.randint(0, maxp, (L, slots, G), generator=gen).to("cuda", torch.int32)
    skip = (torch.rand(B, generator=gen) < 0.25).to("cuda")
    shape = (L, slots, G, 12) if per_head else (L, slots, 12)
    outs = []
    for fn in (tri, ref):
        ids = torch.full(shape, -7, dtype=torch.int32, device="cuda")
        cnt = torch.full((L, slots), -1, dtype=torch.int32, device="cuda")
        h, hn = hist.clone(), hist_n.clone()
        fn(scores, new_len.to("cuda"), rtt[:, ::P], 0.07, 4, 1, ids, cnt, per_head=per_head, rows=rows,
           table_rows=rows, page_div=P, num_scored=win.to("cuda"), recent_share=0.25, skip=skip, hist=h, hist_n=hn,
           smoothing=smoothing, ema=0.6)
        outs.append((ids, cnt, h, hn))
    for a, b in zip(*outs):
        assert torch.equal(a, b)


@pytest.mark.parametrize("M", [1, 8, 17, 32, 33, 64])
@pytest.mark.parametrize("res", [False, True])
def test_norm_pair_linear_pycode_shapes(M, res):
    """The fused draft-layer launches at pycode-30m's shapes (hidden 512, 4 + 2 + 2 heads of 128, intermediate 1536),
    bf16, against the fp32 reference: both round the output once from the same fp32 quantities (one bf16 ulp, 2^-8,
    where they fall on either side of a rounding boundary; 2^-7 relative with margin)."""
    tri, ref = _kernels("norm_pair_linear")
    gen = torch.Generator().manual_seed(M)
    x = torch.randn(M, 512, generator=gen).to(torch.bfloat16).cuda()
    r = torch.randn(M, 512, generator=gen).to(torch.bfloat16).cuda() if res else None
    pos = torch.randint(0, 16384, (M,), generator=gen).cuda()
    ang = torch.arange(16384)[:, None] * (1e5 ** (-torch.arange(64) / 64))[None, :]
    cs = torch.cat([ang.cos(), ang.sin()], 1).cuda()
    for epi, n, kw in (("rope", 1024, dict(positions=pos, cos_sin=cs, head_dim=128, rot_heads=6)),
                       ("silu_mul", 3072, {})):
        w = (torch.randn(n, 512, generator=gen) / 23).to(torch.bfloat16).cuda()
        want, want_r = ref(x, r, w, 1e-6, epi, **kw)
        out = torch.full(tuple(want.shape), float("nan"), dtype=torch.bfloat16, device="cuda")
        got, got_r = tri(x, r, w, 1e-6, epi, out=out, **kw)
        assert not torch.isnan(got).any()
        assert ((got.float() - want.float()).abs() <= 2 ** -7 * want.float().abs().clamp_min(1.0)).all(), epi
        assert torch.equal(got_r, want_r)
