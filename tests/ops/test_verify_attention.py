"""verify_attention: Triton (interpreter on CPU) vs the torch reference, and the reference vs a dense per-row
attention over the contract's view written with plain loops; the split and tile rules; on the GPU (``gpu``), both
engines against the reference at real shapes. The Gluon engine's own tests: test_verify_attention_gluon.py.

Tolerances (outputs |o| <= ~2.5, scores |s| <= ~30):
* reference vs dense: both fp32 over the same dequantized values (summation order only, ~1e-6), then the reference
  rounds to q's dtype once: half an ulp, rtol 2^-8 (bf16) / 2^-11 (fp16).
* Triton vs dense: the kernel rounds, per INT8 page, q·s and p·s_v to fp16 (rel. 2^-11 each; the codes c are exact
  fp16 integers) and the ring's p to tf32 (2^-11): measured <= 5e-4 absolute, so atol 1e-3; then one rounding to
  q's dtype, where the interpreter truncates fp32 -> bf16 (one ulp, rtol 2^-7; the GPU rounds to nearest).
* scores: a logit moves by ~1e-3 (fp16 q·s), a score sums G of them: atol 1e-2, rtol 1e-3.
A wrong page, token, mask or merge moves outputs by O(0.1-1).
"""
import functools
import math

import pytest
import torch

from sgl_spec.kernels.verify_attention import triton as va
from sgl_spec.kernels.verify_attention import splits as vsp
from sgl_spec.kernels.verify_attention.launch_config import VerifyLaunch
from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref, quantize_pages_ref
from sgl_spec.kernels.verify_attention.ref import verify_attention as verify_ref
from sgl_spec.kvcache.format import KVFormat

pytestmark = pytest.mark.interp
SCORE_TOL = dict(atol=1e-2, rtol=1e-3)


def out_rtol(dtype, kernel):
    """Final rounding to q's dtype: half an ulp, a whole one for bf16 under the interpreter (it truncates)."""
    if dtype == torch.bfloat16:
        return 2 ** -7 if kernel else 2 ** -8
    return 2 ** -11


def make_case(B, NQ, Hq, Hkv, D, P, q_start, dtype, maxp=None, seed=0):
    """Random pages/ring/queries. Unused page-table entries point far outside the store, and ring entries the window
    may not read (stale: past the last row, or the other ring page when the window stays in one page) are NaN."""
    g = torch.Generator().manual_seed(seed)
    q_start = torch.tensor(q_start, dtype=torch.int32)
    n_pages = (q_start + NQ - 1) // P
    maxp = maxp or int(n_pages.max()) + 2
    total = int(n_pages.sum()) + 3
    fmt = KVFormat(P, Hkv, D)
    store = fmt.alloc(total)
    # per-channel key offsets so that key scales differ across channels
    k = torch.randn(total, Hkv, P, D, generator=g) + torch.randn(1, Hkv, 1, D, generator=g) * 2
    v = torch.randn(total, Hkv, P, D, generator=g)
    for name, t in quantize_pages_ref(k, v).items():
        getattr(store, name).copy_(t)
    perm = torch.randperm(total, generator=g)
    page_table = torch.full((B, maxp), 10**6, dtype=torch.int32)
    used = 0
    for b in range(B):
        nb = int(n_pages[b])
        page_table[b, :nb] = perm[used:used + nb].int()
        used += nb
    num_slots = B + 2
    hot_slot = torch.randperm(num_slots, generator=g)[:B].int()
    hot_k = torch.randn(num_slots, 2, P, Hkv, D, generator=g).to(dtype)
    hot_v = torch.randn(num_slots, 2, P, Hkv, D, generator=g).to(dtype)
    for b in range(B):
        s, qs = int(hot_slot[b]), int(q_start[b])
        last = qs + NQ - 1
        for L in (qs // P, qs // P + 1):
            for n in range(P):
                if L * P + n > last:
                    hot_k[s, L % 2, n] = float("nan")
                    hot_v[s, L % 2, n] = float("nan")
    q = torch.randn(B, NQ, Hq, D, generator=g).to(dtype)
    return q, store, page_table, q_start, hot_k, hot_v, hot_slot


def dense_attention(q, store, page_table, q_start, hot_k, hot_v, hot_slot, sm_scale, score_rows):
    """Row by row, literally: INT8 view of logical pages j < p//P, then ring positions (p//P)*P … p."""
    B, NQ, Hq, D = q.shape
    _, Hkv, P, _ = store.k_upper.shape
    G = Hq // Hkv
    out = torch.zeros(B, NQ, Hq, D)
    scores = {}
    for b in range(B):
        pid = [int(x) for x in page_table[b]]
        def page_kv(j):
            i = pid[j]
            kk = dequant_keys_ref(store.k_upper[i], store.k_lower[i], store.k_scale[i], store.k_zero[i], False)
            vv = dequant_values_ref(store.v_upper[i], store.v_lower[i], store.v_scale[i], store.v_zero[i], False)
            return kk.transpose(0, 1), vv.transpose(0, 1)  # [P, Hkv, D]
        logit_rows = {}
        for r in range(NQ):
            p = int(q_start[b]) + r
            ks, vs = [], []
            for j in range(p // P):
                kk, vv = page_kv(j)
                ks.append(kk)
                vs.append(vv)
            s = int(hot_slot[b])
            for t in range((p // P) * P, p + 1):
                ks.append(hot_k[s, (t // P) % 2, t % P].float()[None])
                vs.append(hot_v[s, (t // P) % 2, t % P].float()[None])
            K, V = torch.cat(ks), torch.cat(vs)  # [T, Hkv, D]
            for hq in range(Hq):
                lg = (K[:, hq // G] @ q[b, r, hq].float()) * sm_scale
                out[b, r, hq] = torch.softmax(lg, 0) @ V[:, hq // G]
                logit_rows[(r, hq)] = lg
        for h in range(Hkv):
            for j in range(int(q_start[b]) // P):
                scores[(b, h, j)] = sum(
                    max(float(logit_rows[(r, h * G + gg)][j * P:(j + 1) * P].max()) for r in score_rows)
                    for gg in range(G))
    return out, scores


def run(fn, case, sm_scale, with_scores, score_rows=None, maxp=None):
    q, store, pt, qs, hk, hv, hs = case
    B, _, _, _ = q.shape
    Hkv = store.k_upper.shape[1]
    out = torch.full_like(q, float("nan"))
    scores = torch.full((B, Hkv, pt.shape[1]), float("nan")) if with_scores else None
    res = fn(q, store, pt, qs, hk, hv, hs, sm_scale, scores=scores, score_rows=score_rows, out=out)
    assert res is out
    return out, scores


def check_scores_written(scores, q_start, P):
    for b in range(scores.shape[0]):
        n = int(q_start[b]) // P
        assert torch.isfinite(scores[b, :, :n]).all()
        assert torch.isnan(scores[b, :, n:]).all(), "entries j >= q_start // P must stay unwritten"


# (B, NQ, Hq, Hkv, D, P, dtype, q_start per request, score_rows); q_start mixes: window crossing a page boundary,
# inside one page, before the first page boundary (no INT8 pages), and a row starting exactly on a boundary.
CASES = [
    (1, 1, 4, 2, 64, 32, torch.float16, [100], None),
    (1, 1, 8, 8, 128, 64, torch.bfloat16, [128], None),
    (3, 1, 4, 2, 64, 64, torch.float16, [64, 5, 191], None),
    (3, 5, 4, 2, 64, 32, torch.bfloat16, [94, 67, 10], None),
    (3, 5, 8, 8, 128, 32, torch.float16, [29, 130, 96], (4, 0)),
    (1, 5, 8, 8, 64, 64, torch.float16, [125], (2, 2)),
    (3, 8, 4, 2, 128, 64, torch.float16, [60, 250, 3], None),
    (1, 8, 8, 8, 64, 32, torch.bfloat16, [157], (0, 3)),
    (3, 8, 8, 8, 64, 64, torch.bfloat16, [120, 64, 57], None),
    (1, 9, 16, 2, 64, 32, torch.float16, [90], None),  # G = 8, 72 rows: two row blocks
    (3, 5, 12, 2, 64, 32, torch.bfloat16, [70, 31, 128], (4, 1)),  # G = 6: not a power of two
    (2, 10, 9, 3, 64, 64, torch.bfloat16, [150, 70], None),  # G = 3, D = 64, γ = 9: SmolLM2's default window
    (2, 8, 10, 2, 128, 64, torch.bfloat16, [200, 90], None),  # G = 5, γ = 7
    (1, 9, 7, 1, 64, 32, torch.float16, [100], None),  # G = 7, γ = 8
    # many requests; lengths 1 (q_start 0) and 63, every position class around page boundaries
    (17, 1, 4, 2, 64, 32, torch.float16, [0, 62, 31, 32, 33, 63, 64, 95, 96, 100, 127, 128, 5, 200, 255, 256, 1], None),
    (1, 5, 4, 2, 64, 32, torch.bfloat16, [1000], None),  # a longer context: 31 INT8 pages
    (1, 5, 4, 2, 64, 32, torch.float16, [3], None),  # no INT8 page in the whole batch
]


def few_and_many_splits(monkeypatch):
    """Yield the launcher's default partition, then splits of one or two pages (so the stage-2 merge sees several
    partials at these tiny shapes)."""
    yield "default"
    monkeypatch.setattr(vsp, "MIN_TOKENS_PER_SPLIT", 0)
    monkeypatch.setattr(vsp, "PROGRAMS_PER_SM", 8)
    yield "many"


@pytest.mark.parametrize("B,NQ,Hq,Hkv,D,P,dtype,q_start,score_rows", CASES)
def test_verify_attention(monkeypatch, B, NQ, Hq, Hkv, D, P, dtype, q_start, score_rows):
    case = make_case(B, NQ, Hq, Hkv, D, P, q_start, dtype, seed=B * 100 + NQ)
    sm_scale = 1.0 / math.sqrt(D)
    rows = score_rows if score_rows is not None else (min(1, NQ - 1), NQ - 1)

    ref_out, ref_sc = run(verify_ref, case, sm_scale, True, score_rows)
    dense_out, dense_sc = dense_attention(*case, sm_scale, rows)
    torch.testing.assert_close(ref_out.float(), dense_out, atol=1e-5, rtol=out_rtol(dtype, False))
    check_scores_written(ref_sc, case[3], P)
    for (b, h, j), val in dense_sc.items():
        assert abs(float(ref_sc[b, h, j]) - val) <= 1e-4 * max(1.0, abs(val))

    for mode in few_and_many_splits(monkeypatch):
        out, sc = run(va.verify_attention, case, sm_scale, True, score_rows)
        torch.testing.assert_close(out.float(), dense_out, atol=1e-3, rtol=out_rtol(dtype, True),
                                   msg=lambda m: f"{mode} splits: {m}")
        check_scores_written(sc, case[3], P)
        torch.testing.assert_close(sc.nan_to_num(0.0), ref_sc.nan_to_num(0.0), **SCORE_TOL)
    # scores off: same out, bit for bit (the flag only removes the score epilogue)
    out_off, _ = run(va.verify_attention, case, sm_scale, False, score_rows)
    assert torch.equal(out_off, out)


@pytest.mark.parametrize("num_splits", [None, 1, 2, 3])
@pytest.mark.parametrize("case_i", [3, 6, 11, 12])
def test_batch_following_splits(monkeypatch, case_i, num_splits):
    """batch_invariant=False (the server's default): each request's pages cut into NS splits of C_b = max(C,
    cdiv(q_start // P + 1, NS)) pages (NS from B, or forced: one split holding every page, splits of unequal
    length, splits past a short request's last page) - against the reference, scores included, and stage 2 reads
    exactly the splits stage 1 wrote (NaN-poisoned outputs)."""
    B, NQ, Hq, Hkv, D, P, dtype, q_start, score_rows = CASES[case_i]
    if num_splits is None:
        monkeypatch.setattr(vsp, "MIN_TOKENS_PER_SPLIT", 0)  # C = 1: the rule's NS decides the partition alone
    case = make_case(B, NQ, Hq, Hkv, D, P, q_start, dtype, seed=B * 100 + NQ + 7)
    sm_scale = 1.0 / math.sqrt(D)
    ref_out, ref_sc = run(verify_ref, case, sm_scale, True, score_rows)
    fn = functools.partial(va.verify_attention, batch_invariant=False, launch=VerifyLaunch(num_splits=num_splits))
    out, sc = run(fn, case, sm_scale, True, score_rows)
    torch.testing.assert_close(out.float(), ref_out.float(), atol=1e-3, rtol=out_rtol(dtype, True))
    check_scores_written(sc, case[3], P)
    torch.testing.assert_close(sc.nan_to_num(0.0), ref_sc.nan_to_num(0.0), **SCORE_TOL)


# γ >= 8 at G = 2 (pycode-30m): more rows than the G-only tile of 16; a window crossing a page boundary, one inside
# a page, one with no INT8 page; and G = 4 with 36 rows (more than MAX_BLOCK_ROWS: still two row blocks)
LONG_CASES = [
    (3, 9, 4, 2, 64, 32, torch.float16, [90, 40, 5], None),
    (2, 13, 4, 2, 128, 64, torch.bfloat16, [250, 129], (0, 12)),
    (1, 16, 2, 1, 64, 32, torch.float16, [77], None),
    (2, 9, 8, 2, 64, 32, torch.bfloat16, [100, 33], None),
]
LONG_TILES = [(16, 16, 32), (16, 16, 32), (16, 16, 32), (32, 32, 32)]  # G-only, NQ = 1, NQ: rows a program


@pytest.mark.parametrize("case_i", range(len(LONG_CASES)))
def test_long_window_row_tile(monkeypatch, case_i):
    """A long window (NQ * G above the G-only tile) takes one row tile of up to MAX_BLOCK_ROWS rows when the launch
    need not be batch-invariant, and the G-only tile (several row blocks) when it must: both against the reference,
    scores included, with the default partition and with splits of one or two pages."""
    B, NQ, Hq, Hkv, D, P, dtype, q_start, score_rows = LONG_CASES[case_i]
    G = Hq // Hkv
    assert va.MAX_BLOCK_ROWS == 32
    assert (va.block_rows(G), va.block_rows(G, 1), va.block_rows(G, NQ)) == LONG_TILES[case_i]
    case = make_case(B, NQ, Hq, Hkv, D, P, q_start, dtype, seed=B * 100 + NQ + 11)
    sm_scale = 1.0 / math.sqrt(D)
    ref_out, ref_sc = run(verify_ref, case, sm_scale, True, score_rows)
    for mode in few_and_many_splits(monkeypatch):
        for invariant in (False, True):
            fn = functools.partial(va.verify_attention, batch_invariant=invariant)
            out, sc = run(fn, case, sm_scale, True, score_rows)
            torch.testing.assert_close(out.float(), ref_out.float(), atol=1e-3, rtol=out_rtol(dtype, True),
                                       msg=lambda m: f"{mode} splits, invariant={invariant}: {m}")
            check_scores_written(sc, case[3], P)
            torch.testing.assert_close(sc.nan_to_num(0.0), ref_sc.nan_to_num(0.0), **SCORE_TOL)


def test_splits_for_batch_rule(monkeypatch):
    """NS follows B (whole waves of B * Hkv * RB * (NS + 1) programs on 2 * 132 slots), never more than the pages
    allow (132 SMs, as on an H200)."""
    monkeypatch.setattr(vsp, "_num_sms", lambda device: 132)
    assert vsp.PROGRAMS_PER_SM == 2
    assert vsp.splits_for_batch(64 * 2, 1000, "cpu") == 7  # pycode-30m, B = 64: 4 waves of 128 x 8 programs
    assert vsp.splits_for_batch(32 * 2, 1000, "cpu") == 7  # B = 32
    assert vsp.splits_for_batch(128 * 2, 1000, "cpu") == 3  # B = 128
    assert vsp.splits_for_batch(1 * 8, 1000, "cpu") == 32  # Llama-3-8B, B = 1: one wave
    assert vsp.splits_for_batch(1 * 2, 65, "cpu") == 65  # B = 1, a short page table: capped by MAXP / C
    assert vsp.splits_for_batch(4096 * 8, 1000, "cpu") == 1  # more programs than slots: one split
    # ring_in_grid=None (the Gluon engine, its ring a launch of its own): only the page programs fill the waves,
    # except that the ring programs are counted where pairs <= slots // 33, so that each finds a slot in the page
    # launch's wave
    auto = dict(ring_in_grid=None)
    assert vsp.splits_for_batch(1 * 8, 1000, "cpu", **auto) == 32  # B = 1: 256 page + 8 ring programs, one wave
    assert [vsp.splits_for_batch(b * 8, 1000, "cpu", **auto) for b in (2, 3, 4, 8, 32)] == [16, 11, 8, 4, 1]
    assert vsp.splits_for_batch(64 * 2, 1000, "cpu", **auto) == 2


def _any_splits_case(monkeypatch, case_i):
    """CASES[case_i] with splits of any size."""
    B, NQ, Hq, Hkv, D, P, dtype, q_start, _ = CASES[case_i]
    monkeypatch.setattr(vsp, "MIN_TOKENS_PER_SPLIT", 0)
    return make_case(B, NQ, Hq, Hkv, D, P, q_start, dtype, seed=B * 100 + NQ), 1.0 / math.sqrt(D)


@pytest.mark.parametrize("block_m", [32, 64])
def test_launch_row_tile(block_m):
    """A fixed row tile (``VerifyLaunch(block_m=...)``) wider than the rule's: the same attention and page scores."""
    B, NQ, Hq, Hkv, D, P, dtype, q_start, score_rows = CASES[3]
    case = make_case(B, NQ, Hq, Hkv, D, P, q_start, dtype, seed=5)
    ref_out, ref_sc = run(verify_ref, case, 0.125, True, score_rows)
    fn = functools.partial(va.verify_attention, launch=VerifyLaunch(block_m=block_m))
    out, sc = run(fn, case, 0.125, True, score_rows)
    torch.testing.assert_close(out.float(), ref_out.float(), atol=1e-3, rtol=out_rtol(dtype, True))
    check_scores_written(sc, case[3], P)
    torch.testing.assert_close(sc.nan_to_num(0.0), ref_sc.nan_to_num(0.0), **SCORE_TOL)


KF_CASES = [CASES[1], CASES[6], (3, 5, 8, 2, 128, 64, torch.bfloat16, [700, 64, 1000], (1, 0))]


@pytest.mark.parametrize("case_i", range(len(KF_CASES)))
def test_key_fragment_order(monkeypatch, case_i):
    """Keys and Q^T in the wgmma A fragment's channel and token order (P = 64 and D = 128: key_frag_fits) and the
    plain order elsewhere, against the reference: the same attention and page scores, with the default partition
    and with one-page splits."""
    B, NQ, Hq, Hkv, D, P, dtype, q_start, score_rows = KF_CASES[case_i]
    case = make_case(B, NQ, Hq, Hkv, D, P, q_start, dtype, seed=B * 100 + NQ + 7)
    sm_scale = 1.0 / math.sqrt(D)
    ref_out, ref_sc = run(verify_ref, case, sm_scale, True, score_rows)
    for _ in few_and_many_splits(monkeypatch):
        out, sc = run(va.verify_attention, case, sm_scale, True, score_rows)
        torch.testing.assert_close(out.float(), ref_out.float(), atol=1e-3, rtol=out_rtol(dtype, True))
        check_scores_written(sc, case[3], P)
        torch.testing.assert_close(sc.nan_to_num(0.0), ref_sc.nan_to_num(0.0), **SCORE_TOL)


@pytest.mark.parametrize("impl", ["triton", "ref"])
def test_row_independence(monkeypatch, impl):
    """Row i of an NQ=5 verify equals an NQ=1 decode at q_start+i (same pages/ring/page table/batch shape)."""
    monkeypatch.setattr(vsp, "MIN_TOKENS_PER_SPLIT", 0)
    monkeypatch.setattr(vsp, "PROGRAMS_PER_SM", 8)
    fn = va.verify_attention if impl == "triton" else verify_ref
    B, NQ, Hq, Hkv, D, P = 3, 5, 8, 2, 64, 32
    q_start = [61, 94, 3]  # crosses a boundary after row 2, after row 1 (94+2 = 96), and no INT8 pages
    # the reference takes fp32 queries: its result is then compared before any rounding to a 16-bit dtype
    case = make_case(B, NQ, Hq, Hkv, D, P, q_start, torch.float16, seed=7)
    if impl == "ref":
        case = (case[0].float(),) + case[1:]
    q, store, pt, qs, hk, hv, hs = case
    full, _ = run(fn, case, 0.125, True)
    for i in range(NQ):
        single, _ = run(fn, (q[:, i:i + 1].contiguous(), store, pt, qs + i, hk, hv, hs), 0.125, True)
        if impl == "triton" and full.is_cuda:
            # fixed row tile and page partition: the same arithmetic per row, so bit-identical
            assert torch.equal(single[:, 0], full[:, i]), (i, (single[:, 0] - full[:, i]).abs().max())
        elif impl == "triton":
            # the interpreter runs tl.dot as numpy matmuls, whose BLAS may sum a 1-row and a 5-row tile in another
            # order: fp32 rounding, then at most one fp16 ulp of the output (2^-10 relative)
            torch.testing.assert_close(single[:, 0], full[:, i], atol=2 ** -14, rtol=2 ** -10)
        else:
            # the reference's batched einsum may sum in another order for other shapes: fp32 rounding only
            torch.testing.assert_close(single[:, 0], full[:, i], atol=1e-5, rtol=0)


# ---- score kind "lse": per-page log-sum-exp of each score row, log-add-exp over the two rows, summed over heads ----
def dense_lse_scores(q, store, page_table, q_start, hot_k, hot_v, hot_slot, sm_scale, score_rows):
    """The lse score written the slow way: per request, kv head, page and query head of the group."""
    B, NQ, Hq, D = q.shape
    _, Hkv, P, _ = store.k_upper.shape
    G = Hq // Hkv
    out = {}
    rows = sorted(set(score_rows))
    for b in range(B):
        for j in range(int(q_start[b]) // P):
            i = int(page_table[b, j])
            kk = dequant_keys_ref(store.k_upper[i], store.k_lower[i], store.k_scale[i], store.k_zero[i], False)
            for h in range(Hkv):
                tot = 0.0
                for gg in range(G):
                    lg = torch.cat([(kk[h] @ q[b, r, h * G + gg].float()) * sm_scale for r in rows])
                    tot += float(torch.logsumexp(lg.double(), 0))
                out[(b, h, j)] = tot
    return out


@pytest.mark.parametrize("case_i", [3, 4, 5, 9, 10, 12, 13])
def test_lse_scores(monkeypatch, case_i):
    """lse scores against the reference and a dense log-sum-exp, splits of any size; the output is the "max"
    kind's, bit for bit."""
    B, NQ, Hq, Hkv, D, P, dtype, q_start, score_rows = CASES[case_i]
    case, sm_scale = _any_splits_case(monkeypatch, case_i)
    rows = score_rows if score_rows is not None else (min(1, NQ - 1), NQ - 1)
    q, store, pt, qs, hk, hv, hs = case
    ref_sc = torch.full((B, Hkv, pt.shape[1]), float("nan"))
    ref_out = verify_ref(*case, sm_scale, scores=ref_sc, score_rows=score_rows, score_kind="lse")
    check_scores_written(ref_sc, qs, P)
    for (b, h, j), val in dense_lse_scores(*case, sm_scale, rows).items():
        assert abs(float(ref_sc[b, h, j]) - val) <= 1e-4 * max(1.0, abs(val)), (b, h, j)
    sc = torch.full_like(ref_sc, float("nan"))
    out = va.verify_attention(*case, sm_scale, scores=sc, score_rows=score_rows, score_kind="lse")
    check_scores_written(sc, qs, P)
    torch.testing.assert_close(sc.nan_to_num(0.0), ref_sc.nan_to_num(0.0), **SCORE_TOL)
    out_max = va.verify_attention(*case, sm_scale, scores=torch.zeros_like(sc), score_rows=score_rows)
    assert torch.equal(out, out_max)  # the score kind changes the scores only
    torch.testing.assert_close(out.float(), ref_out.float(), atol=1e-3, rtol=out_rtol(dtype, True))


def test_gluon_ring_rule(monkeypatch):
    """The Gluon engine's ring split runs as a Gluon launch of its own (``gluon_ring.py``) at every batch of a launch
    that need not be batch-invariant; batch-invariant launches, fixed split counts and the Triton engine keep the
    Triton ring launch. Separately, the split rule counts a slot for each ring program only where they fit beside
    the page programs (batch 1 of Llama-3-8B on 132 SMs)."""
    assert va.gluon_ring_rule(True, False, None)
    assert not va.gluon_ring_rule(True, True, None) and not va.gluon_ring_rule(True, False, 4)
    assert not va.gluon_ring_rule(False, False, None)
    monkeypatch.setattr(vsp, "_num_sms", lambda device: 132)
    assert vsp.ring_counted(8, "cpu") and not vsp.ring_counted(9, "cpu") and not vsp.ring_counted(64, "cpu")


def test_no_tuning_keywords():
    """The op's signature is the contract's: a geometry to pin goes in one ``VerifyLaunch``."""
    import inspect

    from sgl_spec.kernels.verify_attention.ref import verify_attention as ref

    names = ["q", "store", "page_table", "q_start", "hot_k", "hot_v", "hot_slot", "sm_scale", "scores", "score_rows",
             "out", "score_kind", "batch_invariant", "engine", "launch"]
    assert list(inspect.signature(va.verify_attention).parameters) == names
    assert list(inspect.signature(ref).parameters) == names
    case = make_case(1, 2, 4, 2, 32, 32, [40], torch.float16)
    with pytest.raises(TypeError):
        va.verify_attention(*case, 0.25, num_splits=2)


# ---- on the GPU: real shapes (tests/support/gpu_cases.py: shapes, poisoning, tolerances) --------------------------
def _gpu_kernels():
    from sgl_spec.kernels.verify_attention import verify_attention as tri

    return tri, verify_ref


def _gpu_scores_close(sc, sc_ref, q_start, P):
    from gpu_cases import _close

    for b, s0 in enumerate((q_start // P).tolist()):  # entries j >= q_start // P are left unwritten (contract)
        _close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [1, 63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
@pytest.mark.parametrize("nq", [5, 8])
def test_gpu_matches_ref(B, ctx, P, nq):
    """The Triton kernel with scores on and off, both partitions and both score kinds, and the Gluon page programs
    (P = 128 as two 64-token sub-pages a page) with both partitions, one split and both score kinds, against the
    reference; outputs poisoned with NaN so an unwritten element fails."""
    from gpu_cases import HKV, _close, verify_window

    tri, ref = _gpu_kernels()
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq)
    nq = min(nq, ctx)
    bt, q, q_start, args = verify_window(B, ctx, P, nq, gen)
    nan_scores = lambda: torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")  # noqa: E731
    sc, sc_ref = nan_scores(), nan_scores()
    out = torch.full_like(q, float("nan"))
    tri(*args, scores=sc, out=out)
    want = ref(*args, scores=sc_ref)
    _close(out, want)
    _gpu_scores_close(sc, sc_ref, q_start, P)
    out2 = torch.full_like(q, float("nan"))
    tri(*args, out=out2)  # scores off: the same attention
    _close(out2, want)
    sc, out4 = nan_scores(), torch.full_like(q, float("nan"))
    tri(*args, scores=sc, out=out4, batch_invariant=False)  # the server's default partition (splits follow B)
    _close(out4, want)
    _gpu_scores_close(sc, sc_ref, q_start, P)
    # --quantspec-page-score lse: page log-sum-exps (a column sum of the softmax weights), same attention output
    sc, sc_ref = nan_scores(), nan_scores()
    out3 = torch.full_like(q, float("nan"))
    tri(*args, scores=sc, out=out3, score_kind="lse")
    ref(*args, scores=sc_ref, score_kind="lse")
    _close(out3, want)
    _gpu_scores_close(sc, sc_ref, q_start, P)
    for kw in (dict(), dict(batch_invariant=False), dict(launch=VerifyLaunch(num_splits=1)), dict(score_kind="lse")):
        sc, sc_ref = nan_scores(), nan_scores()
        out = torch.full_like(q, float("nan"))
        tri(*args, scores=sc, out=out, engine="gluon", **kw)
        ref(*args, scores=sc_ref, score_kind=kw.get("score_kind", "max"))
        _close(out, want)
        _gpu_scores_close(sc, sc_ref, q_start, P)
        out = torch.full_like(q, float("nan"))
        tri(*args, out=out, engine="gluon", **kw)  # scores off
        _close(out, want)


@pytest.mark.gpu
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
@pytest.mark.parametrize("nq", [9, 13, 16])
def test_gpu_long_window(B, ctx, P, nq):
    """G = 2 (16 query heads over the 8 KV heads) with γ >= 8: the server's partition puts the window's NQ*2 rows in
    one 32-row tile (block_rows), the batch-invariant one in row blocks of 16; both engines against the reference."""
    from gpu_cases import HKV, _close, verify_window

    tri, ref = _gpu_kernels()
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq + 1)
    bt, q, q_start, args = verify_window(B, ctx, P, nq, gen, hq=2 * HKV)
    sc_ref = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
    want = ref(*args, scores=sc_ref)
    for invariant in (False, True):
        for eng in ("triton", "gluon"):
            sc = torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")
            out = torch.full_like(q, float("nan"))
            tri(*args, scores=sc, out=out, batch_invariant=invariant, engine=eng)
            _close(out, want)
            _gpu_scores_close(sc, sc_ref, q_start, P)
