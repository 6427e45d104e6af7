"""select_topk_pages: the reference against a plain per-request oracle of the contract, and the Triton kernel against
the reference (bit-exact: same page set, same order, same counts). Under TRITON_INTERPRET=1 on CPU, natively on GPU."""
import math

import numpy as np
import pytest
import torch

from sgl_spec.kernels.select_topk_pages import select_topk_pages
from sgl_spec.kernels.select_topk_pages_ref import select_topk_pages as select_topk_pages_ref

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
