"""select_topk_pages: the reference against a plain per-request oracle of the contract, and the Triton kernel against
the reference (bit-exact: same page set, same order, same counts). Under TRITON_INTERPRET=1 on CPU, natively on GPU."""
import math

import numpy as np
import pytest
import torch

from sgl_spec.kernels.select_topk_pages.triton import select_topk_pages
from sgl_spec.kernels.select_topk_pages.ref import select_topk_pages as select_topk_pages_ref

pytestmark = pytest.mark.interp
POISON = -7


def oracle(scores, num_eligible, page_table, ratio, min_pages, sink_pages, kcap):
    """The contract written the slow, obvious way: per (layer, request), sum heads in order, sort (score desc, index
    asc), take sinks first. fp32 where the contract says fp32 (the sum; ceil(ratio * n))."""
    L, B, H, MAXP = scores.shape
    ids = torch.zeros(L, B, kcap, dtype=torch.int64)
    cnt = torch.zeros(L, B, dtype=torch.int64)
    for l in range(L):
        for b in range(B):
            n = min(max(int(num_eligible[b]), 0), MAXP, page_table.shape[1])
            sinks = min(sink_pages, n)
            by_ratio = math.ceil(float(np.float32(ratio) * np.float32(n)))
            k = min(kcap, max(sinks, min(n, max(min_pages, by_ratio))))
            sc = torch.zeros(n, dtype=torch.float32)
            for h in range(H):
                sc = sc + scores[l, b, h, :n]
            rest = sorted(range(sinks, n), key=lambda j: (-float(sc[j]), j))[: k - min(sinks, k)]
            chosen = sorted(list(range(min(sinks, k))) + rest)
            cnt[l, b] = k
            ids[l, b, :k] = page_table[b, chosen].long()
    return ids, cnt


def make_case(L, B, H, MAXP, num_eligible, seed, coarse):
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(L, B, H, MAXP, generator=gen)
    if coarse:  # a coarse grid makes many exact ties (and signed zeros) between pages
        scores = torch.round(scores * 2) / 2
        scores[scores == 0] = -0.0
        scores[..., ::5] = 0.0
    for b, n in enumerate(num_eligible):
        scores[:, b, :, n:] = float("nan")  # garbage beyond the eligible pages must never be read
    page_table = torch.randperm(B * MAXP + 11, generator=gen)[: B * MAXP].view(B, MAXP).to(torch.int32)
    return scores, torch.tensor(num_eligible, dtype=torch.int32), page_table


CASES = [
    # L, B, H, MAXP, KCAP, ratio, min_pages, sink_pages, num_eligible
    (1, 1, 1, 1, 1, 0.07, 4, 1, [1]),
    (2, 3, 2, 63, 8, 0.1, 4, 2, [0, 1, 63]),
    (3, 17, 2, 40, 40, 0.25, 2, 1, [0, 1, 2, 3, 5, 8, 13, 21, 34, 40, 39, 7, 9, 11, 4, 6, 30]),
    (1, 3, 4, 130, 5, 0.5, 1, 3, [2, 100, 130]),  # KCAP clips k; 2 eligible < 3 sinks
    (2, 2, 1, 50, 6, 0.07, 1, 8, [20, 5]),  # more sinks than min_pages / KCAP: sinks win, then KCAP clips them
    (1, 2, 2, 200, 64, 0.07, 3, 1, [100, 200]),  # 0.07 * 100 = 7 in fp32 (it is 7.000000000000001 in fp64)
]


@pytest.mark.parametrize("coarse", [False, True])
@pytest.mark.parametrize("L,B,H,MAXP,KCAP,ratio,min_pages,sink_pages,ne", CASES)
def test_ref_matches_oracle_and_kernel_matches_ref(L, B, H, MAXP, KCAP, ratio, min_pages, sink_pages, ne, coarse,
                                                   device):
    scores, num_eligible, page_table = make_case(L, B, H, MAXP, ne, seed=L * 100 + MAXP, coarse=coarse)
    exp_ids, exp_cnt = oracle(scores, num_eligible, page_table, ratio, min_pages, sink_pages, KCAP)

    ids_r = torch.full((L, B, KCAP), POISON, dtype=torch.int32)
    cnt_r = torch.full((L, B), POISON, dtype=torch.int32)
    select_topk_pages_ref(scores, num_eligible, page_table, ratio, min_pages, sink_pages, ids_r, cnt_r)
    assert torch.equal(cnt_r.long(), exp_cnt)
    assert torch.equal(ids_r.long(), exp_ids)

    ids_t = torch.full((L, B, KCAP), POISON, dtype=torch.int32, device=device)
    cnt_t = torch.full((L, B), POISON, dtype=torch.int32, device=device)
    out = select_topk_pages(scores.to(device), num_eligible.to(device), page_table.to(device), ratio, min_pages,
                            sink_pages, out_ids=ids_t, out_count=cnt_t)
    assert out[0] is ids_t and out[1] is cnt_t
    assert torch.equal(cnt_t.cpu(), cnt_r)
    assert torch.equal(ids_t.cpu(), ids_r)  # every slot written: chosen ids, then zeros (no POISON survives)


def test_long_context_4096_pages(device):
    """256k tokens at P = 64: one program holds 4096 scores; int64 page table; L > 1."""
    L, B, H, MAXP, KCAP = 2, 2, 2, 4096, 320
    scores, num_eligible, page_table = make_case(L, B, H, MAXP, [4096, 3001], seed=5, coarse=False)
    scores[0, 0, :, 1000:1010] = 50.0  # a block of exact ties at the top
    page_table = page_table.long()
    ref = select_topk_pages_ref(scores, num_eligible, page_table, 0.07, 16, 1,
                                out_ids=torch.full((L, B, KCAP), POISON, dtype=torch.int64))
    got = select_topk_pages(scores.to(device), num_eligible.to(device), page_table.to(device), 0.07, 16, 1,
                            out_ids=torch.full((L, B, KCAP), POISON, dtype=torch.int64, device=device))
    assert ref[1].tolist() == [[287, 211], [287, 211]]  # ceil(0.07 * 4096) = 287, ceil(0.07 * 3001) = 211
    assert torch.equal(got[0].cpu(), ref[0]) and torch.equal(got[1].cpu(), ref[1])
    logical = {int(p): j for j, p in enumerate(page_table[0].tolist())}
    chosen = [logical[int(p)] for p in ref[0][0, 0, :287]]
    assert chosen == sorted(chosen) and chosen[0] == 0 and set(range(1000, 1010)) <= set(chosen)


def test_defaults_and_garbage_independence(device):
    """out_ids/out_count default to int32 [L, B, MAXP] / [L, B]; finite garbage beyond num_eligible changes nothing."""
    L, B, H, MAXP = 2, 3, 2, 33
    scores, num_eligible, page_table = make_case(L, B, H, MAXP, [33, 0, 17], seed=9, coarse=True)
    ids, cnt = select_topk_pages(scores.to(device), num_eligible.to(device), page_table.to(device), 0.3, 2, 1)
    assert ids.shape == (L, B, MAXP) and ids.dtype == torch.int32 and cnt.dtype == torch.int32
    other = scores.clone()
    for b, n in enumerate(num_eligible.tolist()):
        other[:, b, :, n:] = 1e30
    ids2, cnt2 = select_topk_pages(other.to(device), num_eligible.to(device), page_table.to(device), 0.3, 2, 1)
    assert torch.equal(ids, ids2) and torch.equal(cnt, cnt2)
    ids_r, cnt_r = select_topk_pages_ref(scores, num_eligible, page_table, 0.3, 2, 1)
    assert torch.equal(ids.cpu(), ids_r) and torch.equal(cnt.cpu(), cnt_r)


# ---- policy options: slot rows, token units, unscored pages, recent share, smoothing, skip, per head -------------
OPT_CASES = [
    # L, B, H, MAXP, KCAP, ratio, min_pages, sink_pages, share, smoothing, per_head
    (2, 3, 2, 37, 9, 0.2, 2, 1, 0.0, "none", False),
    (3, 5, 2, 21, 6, 0.3, 1, 0, 0.5, "ema", False),
    (1, 4, 3, 50, 11, 0.1, 3, 2, 0.25, "max", False),
    (2, 3, 2, 19, 5, 0.3, 2, 1, 0.5, "ema", True),
    (1, 2, 4, 70, 8, 0.07, 4, 1, 1.0, "max", True),
    (2, 3, 3, 9, 3, 0.5, 1, 1, 0.0, "none", True),
]


def _opt_inputs(L, B, H, MAXP, KCAP, per_head, seed, P=4):
    gen = torch.Generator().manual_seed(seed)
    R = B + 3  # more slots than requests: rows scatter into them
    rows = torch.randperm(R, generator=gen)[:B]
    tokens = torch.randint(0, MAXP * P + P, (B,), generator=gen)  # beyond MAXP pages too (clipped)
    tokens[0] = MAXP * P - 1
    scored_tok = (tokens - torch.randint(0, 2 * P, (B,), generator=gen)).clamp(min=-3)  # some unscored pages
    scores = torch.round(torch.randn(L, B, H, MAXP, generator=gen) * 4) / 4  # ties
    for b in range(B):
        scores[:, b, :, max(int(scored_tok[b]) // P, 0):] = float("nan")  # unscored: never read
    slots_tok = torch.randperm(R * MAXP * 2, generator=gen)[: R * MAXP].view(R, MAXP) * P + 1  # token slots
    G = H if per_head else 1
    hist = torch.randn(L, R, G, MAXP + 2, generator=gen)
    hist_n = torch.randint(0, MAXP + 1, (L, R, G), generator=gen).to(torch.int32)
    ids = torch.full((L, R, G, KCAP) if per_head else (L, R, KCAP), POISON, dtype=torch.int32)
    cnt = torch.full((L, R), POISON, dtype=torch.int32)
    skip = torch.rand(B, generator=gen) < 0.3
    return dict(scores=scores, tokens=tokens, scored=scored_tok, table=slots_tok, rows=rows, hist=hist,
                hist_n=hist_n, ids=ids, cnt=cnt, skip=skip, P=P)


def _run_opts(fn, x, dev, ratio, min_pages, sink_pages, share, smoothing, per_head, with_scores, use_skip):
    t = {k: (v.clone().to(dev) if torch.is_tensor(v) else v) for k, v in x.items()}
    fn(t["scores"] if with_scores else None, t["tokens"], t["table"], ratio, min_pages, sink_pages, t["ids"],
       t["cnt"], per_head=per_head, rows=t["rows"], table_rows=t["rows"], page_div=t["P"], num_scored=t["scored"],
       recent_share=share, skip=t["skip"] if use_skip else None, hist=t["hist"], hist_n=t["hist_n"],
       smoothing=smoothing, ema=0.7)
    return {k: t[k].cpu() for k in ("ids", "cnt", "hist", "hist_n")}


@pytest.mark.parametrize("with_scores,use_skip", [(True, False), (True, True), (False, True)])
@pytest.mark.parametrize("L,B,H,MAXP,KCAP,ratio,min_pages,sink_pages,share,smoothing,per_head", OPT_CASES)
def test_options_kernel_matches_ref(L, B, H, MAXP, KCAP, ratio, min_pages, sink_pages, share, smoothing, per_head,
                                    with_scores, use_skip, device):
    x = _opt_inputs(L, B, H, MAXP, KCAP, per_head, seed=L * 7 + MAXP)
    args = (ratio, min_pages, sink_pages, share, smoothing, per_head, with_scores, use_skip)
    ref = _run_opts(select_topk_pages_ref, x, "cpu", *args)
    got = _run_opts(select_topk_pages, x, device, *args)
    for k in ref:
        assert torch.equal(got[k], ref[k]), k
    # rows not in the batch and skipped rows are untouched
    touched = torch.zeros(x["ids"].shape[1], dtype=torch.bool)
    touched[x["rows"][~x["skip"]] if use_skip else x["rows"]] = True
    assert (ref["cnt"][:, ~touched] == POISON).all() and (ref["cnt"][:, touched] != POISON).all()
    assert torch.equal(ref["hist_n"][:, ~touched], x["hist_n"][:, ~touched])


def test_options_oracle_one_row():
    """The ref's options against the rule written per page: tokens -> pages, unscored + recent pages forced, ema."""
    L, B, H, MAXP, KCAP = 1, 1, 2, 30, 10
    x = _opt_inputs(L, B, H, MAXP, KCAP, False, seed=3)
    P, share, beta = x["P"], 0.5, 0.7
    x["tokens"][0], x["scored"][0] = 26 * P + 1, 25 * P - 2  # n = 26, scored = 24: pages 24, 25 unscored
    x["skip"][0] = False
    x["scores"][0, 0, :, 24:] = float("nan")
    x["hist_n"][0, x["rows"][0], 0] = 11
    out = _run_opts(select_topk_pages_ref, x, "cpu", 0.3, 2, 1, share, "ema", False, True, False)
    n, scored, row = 26, 24, int(x["rows"][0])
    k = max(min(n, max(2, math.ceil(float(np.float32(0.3) * np.float32(n))))), 1)  # 8
    total = [float(np.float32(x["scores"][0, 0, 0, j]) + np.float32(x["scores"][0, 0, 1, j])) for j in range(scored)]
    h = x["hist"][0, row, 0]
    rank = [float(np.float32(beta) * h[j] + np.float32(1 - beta) * np.float32(total[j])) if j < 11 else total[j]
            for j in range(scored)]
    forced = max(math.floor(share * (k - 1)), n - scored)  # 3
    newest = list(range(n - forced, n))
    best = sorted(range(1, n - forced), key=lambda j: (-rank[j], j))[: k - 1 - forced]
    want = sorted([0] + newest + best)
    assert int(out["cnt"][0, row]) == k
    assert out["ids"][0, row, :k].tolist() == [int(x["table"][row, j]) // P for j in want]
    assert int(out["hist_n"][0, row, 0]) == scored
    assert torch.allclose(out["hist"][0, row, 0, :scored], torch.tensor(rank))


# ---- on the GPU: real shapes against the reference (tests/support/gpu_cases.py) -------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [1, 63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_gpu_select_topk_pages(B, ctx, P):
    from gpu_cases import HKV, _kernels
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


@pytest.mark.gpu
@pytest.mark.parametrize("smoothing", ["none", "ema", "max"])
@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("B", [1, 17])
def test_gpu_select_topk_pages_policy_options(B, per_head, smoothing):
    """The draft page policies' launch (sgl_spec/pages/policies.py): req_to_token-like token table read by slot, token
    counts, unscored (completed) pages, a recent share, a score history, skipped rows; per layer or per kv head."""
    from gpu_cases import HKV, _kernels
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
