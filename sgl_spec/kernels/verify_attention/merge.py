"""Stage 2 of ``verify_attention`` (``triton.py``): merge the per-split partials of every row, and
(in extra programs of the same launch) reduce the score rows' raw per-page column maxima to the page scores.
"""
from __future__ import annotations

import triton
import triton.language as tl

from sgl_spec.kernels.common.pdl import _wait_prior
from sgl_spec.kernels.verify_attention.splits import _split_pages


@triton.jit
def _score_tile(RAW, SCORES, t, b, q_start, n_front, sm_scale, HKV, MAXP, sr_b, ssc_b, ssc_h, ssc_j,
                G: tl.constexpr, P: tl.constexpr, BLOCK_SJ: tl.constexpr, SCORE_LSE: tl.constexpr,
                VEC: tl.constexpr):
    """Scores of BLOCK_SJ (head, page) pairs from the raw per-row values stage 1 wrote: sum over the G heads of the
    max (score kind "max": raw column maxima) or the log-add-exp (kind "lse": raw page log-sum-exps) over the score
    rows (slot 0, and slot 1 when the two rows differ), in sm_scale units. Pages j >= q_start // P are never written
    (as in the reference). VEC (G a power of two): each (head, page)'s 2G contiguous values as one row of a
    [BLOCK_SJ, 2G] tile, so the loads coalesce; else one strided load a column."""
    idx = t * BLOCK_SJ + tl.arange(0, BLOCK_SJ)
    hk = idx // MAXP
    jj = idx % MAXP
    ok = (hk < HKV) & (jj < q_start // P)
    base = RAW + b * sr_b + idx.to(tl.int64) * (2 * G)  # raw [B, Hkv, MAXP, 2G] is contiguous
    if VEC:
        c = tl.arange(0, 2 * G)
        v = tl.load(base[:, None] + c[None, :], mask=ok[:, None] & ((c < G) | (n_front == 2))[None, :],
                    other=float("-inf"))
        if SCORE_LSE:
            x1, x2 = tl.split(tl.permute(tl.reshape(v * sm_scale, [BLOCK_SJ, 2, G]), [0, 2, 1]))
            acc = tl.sum(_log_add_exp(x1, x2), 1)
        else:
            acc = tl.sum(tl.max(tl.reshape(v, [BLOCK_SJ, 2, G]), 1), 1)
    else:
        acc = _score_strided(base, ok, n_front, sm_scale, G, SCORE_LSE)
    if not SCORE_LSE:
        acc = acc * sm_scale
    tl.store(SCORES + b * ssc_b + hk.to(tl.int64) * ssc_h + jj.to(tl.int64) * ssc_j, acc, mask=ok)


@triton.jit
def _log_add_exp(x1, x2):
    """Natural log: ln(e^x1 + e^x2); -inf stays -inf (no NaN from -inf - -inf)."""
    mx = tl.maximum(x1, x2)
    safe = tl.where(mx == float("-inf"), 0.0, mx)
    return safe + tl.log(tl.exp(x1 - safe) + tl.exp(x2 - safe))


@triton.jit
def _score_strided(base, ok, n_front, sm_scale, G: tl.constexpr, SCORE_LSE: tl.constexpr):
    """_score_tile's sums one strided column load at a time (any G)."""
    acc = tl.zeros(ok.shape, tl.float32)
    for g in tl.static_range(G):
        a = tl.load(base + g, mask=ok, other=0.0)
        a2 = tl.load(base + G + g, mask=ok & (n_front == 2), other=float("-inf"))
        if SCORE_LSE:  # x = sm_scale · raw
            acc += _log_add_exp(a * sm_scale, a2 * sm_scale)
        else:
            acc += tl.maximum(a, a2)
    return acc


@triton.jit(do_not_specialize=["NQ", "C", "NS", "n_front"])
def _verify_merge_kernel(
    PM, PL, PACC, QSTART, OUT, RAW, SCORES, NQ, HQ, S1, C, NS, so_b, so_n, so_h,
    n_front, sm_scale, HKV, MAXP, sr_b, ssc_b, ssc_h, ssc_j,
    P: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_S: tl.constexpr,
    G: tl.constexpr, N_HB: tl.constexpr, BLOCK_SJ: tl.constexpr, SCORE_LSE: tl.constexpr, PDL: tl.constexpr = False,
    ONE_STEP: tl.constexpr = False, VEC: tl.constexpr = False,
):
    """Programs pid0 < N_HB: rows (b, i, BLOCK_H heads): out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s.
    Everything is per row (reductions run over the split axis only), so a row's result does not depend on its
    neighbours. Programs pid0 >= N_HB (launched with raw scores only): score tile (pid0 - N_HB) * NQ + pid1."""
    _wait_prior(PDL)
    pid0 = tl.program_id(0)
    if pid0 >= N_HB:  # only launched with raw scores
        b = tl.program_id(2).to(tl.int64)
        _score_tile(RAW, SCORES, (pid0 - N_HB) * NQ + tl.program_id(1), b, tl.load(QSTART + b), n_front, sm_scale,
                    HKV, MAXP, sr_b, ssc_b, ssc_h, ssc_j, G, P, BLOCK_SJ, SCORE_LSE, VEC)
    else:
        _merge_rows(PM, PL, PACC, QSTART, OUT, pid0, NQ, HQ, S1, C, NS, so_b, so_n, so_h, P, D, BLOCK_D, BLOCK_H,
                    BLOCK_S, ONE_STEP)


@triton.jit
def _merge_rows(PM, PL, PACC, QSTART, OUT, pid0, NQ, HQ, S1, C, NS, so_b, so_n, so_h,
                P: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_S: tl.constexpr,
                ONE_STEP: tl.constexpr):
    hh = pid0 * BLOCK_H + tl.arange(0, BLOCK_H)
    i = tl.program_id(1).to(tl.int64)
    b = tl.program_id(2).to(tl.int64)
    q_start = tl.load(QSTART + b)
    Cb = _split_pages(q_start, C, NS, P)  # stage 1's C_b
    n_used = 1 + (((q_start + NQ - 1) // P) + Cb - 1) // Cb  # hot split + page splits that stage 1 wrote
    h_ok = hh < HQ
    row = ((b * NQ + i) * HQ + hh.to(tl.int64)) * S1  # [BLOCK_H]
    so = tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    if ONE_STEP:  # S1 <= BLOCK_S: every load issued before the first reduction (one round trip, not three or more)
        # the loads are masked by S1 (an argument), not by n_used, so they do not wait for the q_start load; the
        # partials stage 1 did not write (garbage) are replaced after, by the values masked loads would give
        ld = h_ok[:, None] & (so < S1)[None, :]
        at = row[:, None] + so[None, :]  # [BLOCK_H, BLOCK_S]
        mv = tl.load(PM + at, mask=ld, other=float("-inf"))
        lv = tl.load(PL + at, mask=ld, other=0.0)
        a = tl.load(PACC + at[:, :, None] * D + d[None, None, :], mask=ld[:, :, None] & (d < D)[None, None, :],
                    other=0.0)
        ok = h_ok[:, None] & (so < n_used)[None, :]
        mv = tl.where(ok, mv, float("-inf"))
        lv = tl.where(ok, lv, 0.0)
        a = tl.where(ok[:, :, None], a, 0.0)
        m_all = tl.where(h_ok, tl.max(mv, 1), 0.0)  # finite: every row sees its own (hot) token
        w = tl.exp2(mv - m_all[:, None])
        l_all = w * lv
        acc = tl.sum(w[:, :, None] * a, 1)
    else:
        mv = tl.full([BLOCK_H, BLOCK_S], float("-inf"), tl.float32)
        for s0 in range(0, n_used, BLOCK_S):
            ok = h_ok[:, None] & (s0 + so < n_used)[None, :]
            mv = tl.maximum(mv, tl.load(PM + row[:, None] + s0 + so[None, :], mask=ok, other=float("-inf")))
        m_all = tl.where(h_ok, tl.max(mv, 1), 0.0)  # finite: every row sees its own (hot) token
        l_all = tl.zeros([BLOCK_H, BLOCK_S], tl.float32)
        acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)
        for s0 in range(0, n_used, BLOCK_S):
            ok = h_ok[:, None] & (s0 + so < n_used)[None, :]
            at = row[:, None] + s0 + so[None, :]  # [BLOCK_H, BLOCK_S]
            w = tl.exp2(tl.load(PM + at, mask=ok, other=float("-inf")) - m_all[:, None])
            l_all += w * tl.load(PL + at, mask=ok, other=0.0)
            a = tl.load(PACC + at[:, :, None] * D + d[None, None, :], mask=ok[:, :, None] & (d < D)[None, None, :],
                        other=0.0)
            acc += tl.sum(w[:, :, None] * a, 1)
    o = acc / tl.where(h_ok, tl.sum(l_all, 1), 1.0)[:, None]
    o_ptr = OUT + b * so_b + i * so_n + hh.to(tl.int64)[:, None] * so_h + d[None, :]
    tl.store(o_ptr, o.to(OUT.dtype.element_ty), mask=h_ok[:, None] & (d < D)[None, :])
