"""Score-driven draft page options (sgl_spec/pages/policies.py): recent pages (``--quantspec-recent-share``) and score
smoothing across verifies (``--quantspec-score-smoothing ema|max``), against a plain-Python oracle.

The backend here is a score buffer (by batch row) and a page table behind a ``PageScores`` view; the policy's own
state (its per-slot tables and score history) is what is under test. Page budget: ratio 0.5, min 2, 1 sink page.
"""
import dataclasses
import math
from functools import partial
from types import SimpleNamespace

import pytest
import torch

from sgl_spec.pages import policies as pagetable
from sgl_spec.pages.view import PageScores

L, SLOTS, H, MAXP, P = 2, 5, 2, 24, 4


class Backend:
    def __init__(self, share=0.0, smoothing="none", beta=0.5, ratio=0.5, min_pages=2, sink_pages=1):
        self.cfg = SimpleNamespace(page_size=P, topk_ratio=ratio, min_pages=min_pages, sink_pages=sink_pages,
                                   recent_share=share, score_smoothing=smoothing, score_ema=beta)
        self.page_scores = torch.full((L, SLOTS, H, MAXP), float("nan"))  # unscored entries must never be read
        g = torch.Generator().manual_seed(5)
        self.table = torch.stack([torch.randperm(1000, generator=g)[:MAXP] for _ in range(SLOTS)]).int()

    def page_table(self, rpi):
        return self.table[rpi.long()]

    def scores_view(self):
        return PageScores.of(self.cfg, self.page_scores, self.page_table)


def budget(n, ratio=0.5, min_pages=2, sinks=1):
    k = min(n, max(min_pages, math.ceil(ratio * n)))
    return max(k, min(sinks, n))


def oracle(total, n_next, j, share, sinks=1):
    """Logical pages: sinks, forced newest pages (recent share; the page the window completed), then the best
    ``total`` of the rest (ties -> lower page)."""
    k = budget(n_next)
    s = min(sinks, n_next, k)
    r = math.floor(share * (k - s))
    forced = max(r, 1 if n_next > j else 0)
    newest = [p for p in range(n_next - forced, n_next) if p >= s]
    cands = [p for p in range(s, n_next) if p not in newest]
    best = sorted(cands, key=lambda p: (-total[p], p))[: k - s - len(newest)]
    return sorted(list(range(s)) + newest + best)


def run_round(be, pages, rpi, ws, new, raw, has_pages):
    """One round: for_round (resets history on a first round), the verify writes ``raw`` [L, B, H, MAXP] for pages
    < ws // P, then after_verify."""
    pages.for_round(rpi, ws, has_pages)
    be.page_scores.fill_(float("nan"))
    for b in range(len(rpi)):
        nj = int(ws[b]) // P
        be.page_scores[:, b, :, :nj] = raw[:, b, :, :nj]
    pages.after_verify(rpi, ws, new)


def chosen(be, pages, rpi_next, ws_next):
    ids, count = pages.for_round(rpi_next, ws_next, torch.ones(len(rpi_next), dtype=torch.bool))
    out = []
    for l in range(L):
        row = []
        for b in range(len(rpi_next)):
            k = int(count[l, b])
            assert (ids[l, b, k:] == 0).all()
            table = be.table[int(rpi_next[b])].tolist()
            row.append([table.index(int(i)) for i in ids[l, b, :k]])
        out.append(row)
    return out


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5, 1.0])
def test_recent_share_forces_the_newest_pages(share):
    be = Backend(share=share)
    pages = pagetable.draft_pages(be)
    assert type(pages) is pagetable.TopkPages
    g = torch.Generator().manual_seed(1)
    rpi = torch.tensor([3, 1, 4])
    ws = torch.tensor([22 * P - 2, 13 * P + 1, 2 * P])  # verified pages: < 21, < 13, < 2
    new = ws + torch.tensor([3, 2, 1])  # request 0 completes page 21; 1 and 2 complete none
    raw = torch.randn(L, 3, H, MAXP, generator=g)
    run_round(be, pages, rpi, ws, new, raw, torch.tensor([False] * 3))
    got = chosen(be, pages, rpi, new)
    for l in range(L):
        for b in range(3):
            j, n_next = int(ws[b]) // P, int(new[b]) // P
            total = raw[l, b, 0] + raw[l, b, 1]
            assert got[l][b] == oracle(total.tolist(), n_next, j, share), (l, b)


@pytest.mark.parametrize("mode", ["ema", "max"])
def test_smoothing_combines_this_and_the_previous_verify(mode):
    beta = 0.75
    be = Backend(share=0.25, smoothing=mode, beta=beta)
    pages = pagetable.draft_pages(be)
    g = torch.Generator().manual_seed(2)
    rpi = torch.tensor([2, 0])
    ws1 = torch.tensor([18 * P + 1, 9 * P + 3])
    new1 = ws1 + torch.tensor([4, 1])  # request 0 completes no page, request 1 completes page 9
    raw1, raw2, raw3 = (torch.randn(L, 2, H, MAXP, generator=g) for _ in range(3))
    run_round(be, pages, rpi, ws1, new1, raw1, torch.tensor([False, False]))
    # round 2, batch reordered: the history follows the slot
    rpi2, ws2 = rpi.flip(0), new1.flip(0)
    new2 = ws2 + torch.tensor([3, 1])
    run_round(be, pages, rpi2, ws2, new2, raw2, torch.tensor([True, True]))
    got = chosen(be, pages, rpi2, new2)
    hist = {}
    for b2, b1 in ((0, 1), (1, 0)):
        prev_n, j, n_next = int(ws1[b1]) // P, int(ws2[b2]) // P, int(new2[b2]) // P
        for l in range(L):
            t1 = (raw1[l, b1, 0] + raw1[l, b1, 1]).tolist()
            t2 = (raw2[l, b2, 0] + raw2[l, b2, 1]).tolist()
            comb = [(beta * t1[p] + (1 - beta) * t2[p] if mode == "ema" else max(t1[p], t2[p])) if p < prev_n
                    else t2[p] for p in range(MAXP)]
            hist[(l, b2)] = comb if mode == "ema" else t2
            assert got[l][b2] == oracle(comb, n_next, j, 0.25), (l, b2)
    # round 3: ema keeps the whole history, max only the previous verify
    ws3, new3 = new2, new2 + 1
    run_round(be, pages, rpi2, ws3, new3, raw3, torch.tensor([True, True]))
    got = chosen(be, pages, rpi2, new3)
    for b in range(2):
        prev_n, j, n_next = int(ws2[b]) // P, int(ws3[b]) // P, int(new3[b]) // P
        for l in range(L):
            t3 = (raw3[l, b, 0] + raw3[l, b, 1]).tolist()
            h = hist[(l, b)]
            comb = [(beta * h[p] + (1 - beta) * t3[p] if mode == "ema" else max(h[p], t3[p])) if p < prev_n
                    else t3[p] for p in range(MAXP)]
            assert got[l][b] == oracle(comb, n_next, j, 0.25), (l, b)


def test_smoothing_history_is_reset_when_a_slot_gets_a_new_request():
    be = Backend(smoothing="max")
    pages = pagetable.draft_pages(be)
    g = torch.Generator().manual_seed(3)
    rpi, ws = torch.tensor([1]), torch.tensor([12 * P + 2])
    big = torch.full((L, 1, H, MAXP), 1e6)  # the old request's scores would dominate any max
    run_round(be, pages, rpi, ws, ws + 1, big, torch.tensor([False]))
    raw = torch.randn(L, 1, H, MAXP, generator=g)
    run_round(be, pages, rpi, ws, ws + 1, raw, torch.tensor([False]))  # a new request in slot 1: first round
    got = chosen(be, pages, rpi, ws + 1)
    for l in range(L):
        assert got[l][0] == oracle((raw[l, 0, 0] + raw[l, 0, 1]).tolist(), 12, 12, 0.0)


def test_forced_pages_never_exceed_the_budget_and_duplicates_agree():
    """Tiny contexts (k - sinks = 0 or 1), a forced range reaching page 0, and no sink pages."""
    for sinks in (0, 1):
        be = Backend(share=1.0, sink_pages=sinks, min_pages=1)
        pages = pagetable.draft_pages(be)
        g = torch.Generator().manual_seed(4)
        rpi = torch.tensor([0, 1, 2, 3])
        ws = torch.tensor([P - 1, 2 * P - 1, 3 * P, 0])
        new = ws + torch.tensor([1, 1, 1, 1])  # completes page 0, page 1, none, none (no page at all)
        raw = torch.randn(L, 4, H, MAXP, generator=g)
        run_round(be, pages, rpi, ws, new, raw, torch.tensor([True] * 4))
        ids, count = pages.for_round(rpi, new, torch.ones(4, dtype=torch.bool))
        for b in range(4):
            n_next = int(new[b]) // P
            k = min(n_next, max(1, math.ceil(0.5 * n_next)))
            k = max(k, min(sinks, n_next))
            assert count[:, b].tolist() == [k] * L
            got = [be.table[b].tolist().index(int(i)) for i in ids[0, b, :k]]
            s = min(sinks, n_next, k)
            assert got == list(range(s)) + list(range(n_next - (k - s), n_next)), (sinks, b)  # share 1: all recent


def test_options_from_the_config():
    from sgl_spec.config import QuantSpecConfig

    cfg = QuantSpecConfig(speculative=True, page_size=64, num_draft_steps=4, topk_ratio=0.07, min_pages=8,
                          sink_pages=1, dense_draft=False, recent_share=0.25, score_smoothing="ema", score_ema=0.6)
    assert "recent share 0.25, score smoothing ema (history weight 0.6)" in cfg.describe()
    be = Backend(share=0.25, smoothing="ema", beta=0.6)
    pages = pagetable.draft_pages(be)
    assert pages.hist.shape == (L, SLOTS, 1, MAXP) and pages.hist_n.shape == (L, SLOTS, 1)
    assert pagetable.draft_pages(Backend()).hist is None  # no history without smoothing


# ---- per-request labels (sgl_spec/experimental/page_study.py) ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class StudyCfg:
    """The config fields the per-request policy reads (a frozen dataclass, as label_config replaces fields)."""
    page_size: int = P
    topk_ratio: float = 0.5
    min_pages: int = 2
    sink_pages: int = 1
    dense_draft: bool = False
    draft_pages: str = "per-request"
    recent_share: float = 0.0
    score_smoothing: str = "none"
    score_ema: float = 0.5


def test_label_config():
    from sgl_spec.experimental.page_study import label_config

    Cfg = partial(StudyCfg, topk_ratio=0.07, recent_share=0.5, score_smoothing="max")

    c = label_config("topk+r0.25+ema0.8@0.15", Cfg())
    assert (c.draft_pages, c.recent_share, c.score_smoothing, c.score_ema, c.topk_ratio) == ("topk", 0.25, "ema",
                                                                                              0.8, 0.15)
    c = label_config("topk", Cfg())  # a label is plain unless it says otherwise; the server's ratio
    assert (c.recent_share, c.score_smoothing, c.topk_ratio) == (0.0, "none", 0.07)
    assert label_config("streaming@0.03", Cfg()).draft_pages == "streaming"
    for bad in ("topk-last", "streaming+r0.5", "topk+x", "topk+r2", "topk@0", "topk+emaX", "dense"):
        with pytest.raises(ValueError):
            label_config(bad, Cfg())


def test_per_request_labels_pick_what_each_policy_alone_picks():
    """Rows of three labels (and one unlabelled row) interleaved in one batch, two rounds with a reordered batch:
    every row's pages equal those of a policy object of its own config fed only its rows."""
    from sgl_spec.experimental.page_study import label_config

    be = Backend()
    Cfg = partial(StudyCfg, recent_share=0.5)
    be.cfg = Cfg()
    pages = pagetable.draft_pages(be)
    assert type(pages).__name__ == "PerRequestPages"
    labels = ["topk+r0.25+max@0.3", None, "streaming@0.2", "topk+ema0.5"]
    reqs = [SimpleNamespace(sampling_params=SimpleNamespace(custom_params=None if lb is None else
                                                            {"quantspec_draft": lb, "__req__": object()}))
            for lb in labels]
    alone = {}
    for lb in labels:
        cfg = dataclasses.replace(Cfg(), draft_pages="topk") if lb is None else label_config(lb, Cfg())
        sb = Backend()
        sb.cfg, sb.table = cfg, be.table
        alone[lb] = (sb, pagetable.POLICIES[cfg.draft_pages](sb.scores_view()))
    g = torch.Generator().manual_seed(7)
    rpi = torch.tensor([4, 0, 2, 3])
    ws = torch.tensor([20 * P + 1, 9 * P + 3, 14 * P, 17 * P - 2])
    order = [0, 1, 2, 3]
    for rnd in range(3):
        new = ws + torch.tensor([4, 1, 2, 3])
        raw = torch.randn(L, 4, H, MAXP, generator=g)
        has = torch.tensor([rnd > 0] * 4)
        b_reqs = [reqs[i] for i in order]
        pages.assign(b_reqs)
        ids, count = pages.for_round(rpi, ws, has)
        be.page_scores.fill_(float("nan"))
        for b in range(4):
            be.page_scores[:, b, :, : int(ws[b]) // P] = raw[:, b, :, : int(ws[b]) // P]
        pages.after_verify(rpi, ws, new)
        for b, i in enumerate(order):
            sb, pol = alone[labels[i]]
            one = rpi[b:b + 1]
            i_ids, i_cnt = pol.for_round(one, ws[b:b + 1], has[b:b + 1])
            k = int(i_cnt[0, 0])
            assert count[:, b].tolist() == i_cnt[:, 0].tolist() and torch.equal(ids[:, b, :k], i_ids[:, 0, :k])
            assert (ids[:, b, k:] == 0).all()
            sb.page_scores.fill_(float("nan"))
            sb.page_scores[:, 0, :, : int(ws[b]) // P] = raw[:, b, :, : int(ws[b]) // P]
            pol.after_verify(one, ws[b:b + 1], new[b:b + 1])
        # next round: batch reversed (rows follow their requests)
        perm = torch.tensor([3, 2, 1, 0])
        rpi, ws, order = rpi[perm], new[perm], [order[int(p)] for p in perm]


# ---- per-kv-head tables (--quantspec-draft-pages topk-head) ---------------------------------------------------------
@pytest.mark.parametrize("share,smoothing", [(0.0, "none"), (0.25, "max"), (0.5, "ema")])
def test_topk_head_selects_per_kv_head(share, smoothing):
    """Every kv head's list is what the per-layer oracle picks from that head's scores alone (and its own history)."""
    be = Backend(share=share, smoothing=smoothing, beta=0.75)
    be.cfg.draft_pages = "topk-head"
    pages = pagetable.POLICIES["topk-head"](be.scores_view())
    assert pages.per_head and pages.ids.shape == (L, SLOTS, H, pages.kcap)
    g = torch.Generator().manual_seed(8)
    rpi = torch.tensor([3, 0, 4])
    ws1 = torch.tensor([22 * P - 2, 13 * P + 1, 9 * P])
    new1 = ws1 + torch.tensor([3, 2, 1])  # request 0 completes page 21
    raw1, raw2 = torch.randn(L, 3, H, MAXP, generator=g), torch.randn(L, 3, H, MAXP, generator=g)
    ids, count = pages.for_round(rpi, ws1, torch.tensor([False] * 3))
    assert ids.shape == (L, 3, H, pages.kcap)
    for h in range(1, H):  # first round: streaming pages, the same for every head
        assert torch.equal(ids[:, :, h], ids[:, :, 0])
    run_round(be, pages, rpi, ws1, new1, raw1, torch.tensor([False] * 3))
    ws2, new2 = new1, new1 + torch.tensor([1, 4, 2])
    run_round(be, pages, rpi, ws2, new2, raw2, torch.tensor([True] * 3))
    ids, count = pages.for_round(rpi, new2, torch.ones(3, dtype=torch.bool))
    differ = 0
    for l in range(L):
        for b in range(3):
            prev_n, j, n_next = int(ws1[b]) // P, int(ws2[b]) // P, int(new2[b]) // P
            k = int(count[l, b])
            assert k == budget(n_next)
            table = be.table[int(rpi[b])].tolist()
            lists = []
            for h in range(H):
                t1, t2 = raw1[l, b, h].tolist(), raw2[l, b, h].tolist()
                if smoothing == "none":
                    comb = t2
                else:
                    comb = [(0.75 * t1[p] + 0.25 * t2[p] if smoothing == "ema" else max(t1[p], t2[p]))
                            if p < prev_n else t2[p] for p in range(MAXP)]
                got = [table.index(int(i)) for i in ids[l, b, h, :k]]
                assert got == oracle(comb, n_next, j, share), (l, b, h)
                assert (ids[l, b, h, k:] == 0).all()
                lists.append(got)
            differ += lists[0] != lists[1]
    assert differ > 0  # the heads really choose differently


def test_per_request_mixes_per_head_and_per_layer_labels():
    """A batch with a topk-head label and a topk label: per-head layout, the per-layer rows broadcast over heads."""
    be = Backend()
    be.cfg = StudyCfg()
    pages = pagetable.draft_pages(be)
    reqs = [SimpleNamespace(sampling_params=SimpleNamespace(custom_params={"quantspec_draft": lb}))
            for lb in ("topk-head@0.5", "topk@0.5")]
    g = torch.Generator().manual_seed(9)
    rpi, ws = torch.tensor([1, 2]), torch.tensor([20 * P + 1, 15 * P + 2])
    new = ws + 1
    pages.assign(reqs)
    pages.for_round(rpi, ws, torch.tensor([False, False]))
    raw = torch.randn(L, 2, H, MAXP, generator=g)
    be.page_scores.fill_(float("nan"))
    for b in range(2):
        be.page_scores[:, b, :, : int(ws[b]) // P] = raw[:, b, :, : int(ws[b]) // P]
    pages.after_verify(rpi, ws, new)
    ids, count = pages.for_round(rpi, new, torch.tensor([True, True]))
    assert ids.shape[:3] == (L, 2, H)
    for l in range(L):
        n = int(new[0]) // P
        for h in range(H):
            got = [be.table[1].tolist().index(int(i)) for i in ids[l, 0, h, : int(count[l, 0])]]
            assert got == oracle(raw[l, 0, h].tolist(), n, n, 0.0)
        assert torch.equal(ids[l, 1, 0], ids[l, 1, 1])  # per-layer label: one list, broadcast
        n = int(new[1]) // P
        got = [be.table[2].tolist().index(int(i)) for i in ids[l, 1, 0, : int(count[l, 1])]]
        assert got == oracle((raw[l, 1, 0] + raw[l, 1, 1]).tolist(), n, n, 0.0)
