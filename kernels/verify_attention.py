"""Triton ``verify_attention``: INT8-view paged attention for γ+1 query rows with fused page scores.

Semantics: docs/CONTRACTS.md and the pure-torch twin ``verify_attention_ref.py``. Measurements: bench/NOTES_kernels.md.

Stage 1, grid ``(Hkv * RB, 1 + S, B)``:
* a program owns ``BLOCK_M`` query rows of one KV head: row ``r = slot * G + g`` (``g`` = query head of the group,
  ``slot`` = window row, the two score rows first). With ``batch_invariant=True``, ``BLOCK_M`` depends on ``G``
  only (rows for 8 window positions, 16…64, at least 2G), never on NQ, and NQ-dependent scalars are not specialized:
  a row goes through the same tiles and the same operations whether it is verified with γ others (NQ = γ+1) or
  decoded alone (NQ = 1). ``RB = cdiv(NQ*G, BLOCK_M)`` row blocks (1 for γ ≤ 7 and G ≤ 8) sit next to each other on
  grid axis 0, so they read a page through L2 once. Otherwise (the server's default) a window of more rows than
  that tile gets one tile of up to MAX_BLOCK_ROWS rows (pycode-30m, G = 2: one block up to γ = 15), since each
  extra row block repeats the whole page loop.
* split 0 reads the ring (full precision, ≤ 2 pages, one page per iteration, rows as the MMA M dimension); split
  ``s ≥ 1`` reads logical pages ``[(s-1)C_b, sC_b)`` through the INT8 view, ``C_b = max(C, cdiv(q_start // P + 1,
  NS))`` for ``NS`` page splits (pages a row must not see are exact no-ops for it: alpha = 1, p = 0).
  ``batch_invariant=True`` (``--enable-deterministic-inference``): ``C`` from Hkv, MAXP and the SM count only and
  ``NS = cdiv(MAXP, C)``, so ``C_b = C``: the page sequence a row sees is the same in every call that contains it.
  ``batch_invariant=False`` (the server's default): ``NS`` from B x Hkv (whole waves of programs;
  kernels/verify_splits.py) and ``C`` the smallest split, so each request's own pages are cut into ``NS`` near-equal
  splits: at B=64 a row no longer reads its pages in ~60 splits of 4 (a partial and a prologue every 4 pages, ~30
  waves) but in a few long ones. ``C_b`` follows B and the window's first page, so a row's result may then differ
  in fp32 rounding between batches, or between a verify window and a one-row decode at its position (the output
  stays the same attention).
* INT8 pages (the draft kernel's layout, kernels/draft_decode.py): the page's P tokens are the MMA's M dimension,
  ``S^T [P, BLOCK_M] = K [P, D] Q^T [D, BLOCK_M]`` with the keys dequantized to fp16 in registers (int32 words of
  both planes -> one fp16 FMA per pair, kernels/int8_words.py), so Q^T is one constant operand for every page; and
  ``O^T [D, BLOCK_M] += (C_v - 128)^T [D, P] (p∘s_v)^T [P, BLOCK_M]`` with exact centred value codes; the value zero
  term and the row sums are accumulated per (token, row) and reduced once after the loop. Q keeps its own precision
  (bf16 -> fp16 is exact) and sm_scale·log2(e) is applied to the fp32 logits. Page i+1's words and scales are loaded
  into registers before page i is computed (num_stages=1): Triton's pipeliner, given the page-id load that addresses
  the tiles, waits for all outstanding cp.async copies every page (bench/NOTES_kernels.md).
* PAGES_PER_ITER = 2 (dev variant ``pp=2``, mostly with 8 warps): two pages a loop iteration, each with its own
  dots (its own key scales), one softmax update (max, rescale of O^T / l / z) for both; the pair after next is
  prefetched. A row's page sequence and arithmetic order differ from pp=1 (one rescale per pair), not between rows.
* ROWS_AS_M (dev variants ``qa=1|2``, kernels/verify_pages.py ``_rows_page``): rows as the MMA M dimension
  (BLOCK_M = 64), K / V dequantized into shared memory as wgmma B operands, p in registers; with pp=2 the loop is
  unrolled twice (same per-page arithmetic as pp=1, bit-equal). Both score kinds ("lse": from the row sums).
* page scores (``HAS_SCORES``): from the row block holding the score rows, per page ``j < q_start // P``: max over
  the page's tokens per row (the softmax's column max); the 2G score rows' maxima are stored as they lie in
  registers (no layout conversion) and stage 2 reduces them (max over the two rows, sum over the G heads). No
  atomics. (v1 reduced over the heads in the loop, v2 tried lazy rescaling: both slower, bench/NOTES_kernels.md.)
With ``engine="gluon"`` the page splits run as kernels/verify_pages_gluon.py and split 0 as this kernel's grid
``(Hkv * RB, 1, B)``, or (``gluon_ring_rule``: not batch-invariant) as a Gluon launch of its own
(kernels/verify_ring_gluon.py).
Stage 2 (kernels/verify_merge.py), grid ``(Hq / BLOCK_H + score programs, NQ, B)``: per row, merge the partials
(m, l, acc) of the hot split and of the page splits stage 1 wrote (their count follows from q_start and the
partition; the others are never read); the extra programs reduce the raw score maxima.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from sgl_spec.kernels import verify_splits as splits
from sgl_spec.kernels.verify_splits import _split_pages
from sgl_spec.kernels.nibble_words import key_frag_channels, key_frag_fits
from sgl_spec.kernels.pdl import _release_dependents, _wait_prior, pdl_kwargs
from sgl_spec.kernels.verify_pages import _int8_page, _int8_pair, _load_page, _rows_page
from sgl_spec.kernels.verify_merge import _verify_merge_kernel
from sgl_spec.kernels.verify_attention_ref import SCORE_KINDS, default_score_rows

RING = 2
LOG2E = 1.4426950408889634
MERGE_BLOCK_S = 16  # merge tile: BLOCK_H heads x 16 splits x D, ~8k fp32 (64 registers a thread at 4 warps)
MERGE_TILE = 8192
# Up to this many partials a row are merged in one step (BLOCK_S = S1 padded, BLOCK_H = MERGE_TILE // (BLOCK_S D)):
# every load issued before the first reduction, one round trip instead of three or more (batch 1: 33 splits)
MERGE_ONE_STEP_MAX = 64
# Stage-1 GPU launch: 4 warps (one wgmma warpgroup: M = 64 tokens), register prefetch (num_stages=1); MAXNREG caps
# the registers (None: ptxas's choice, no spills) and must agree with verify_splits.PROGRAMS_PER_SM.
# PAGES_PER_ITER: 1 or 2.
NUM_WARPS = 4
MAXNREG = None
PAGES_PER_ITER = 1
# ROWS_AS_M (dev variant ``qa=1|2``): rows as the MMA M dimension (kernels/verify_pages.py, _rows_page), BLOCK_M >= 64;
# 1: the halves of D as separate tiles and dots, 2: interleaved into one tile (one dot per operand). 0: off
ROWS_AS_M = 0
# KEY_FRAG (``kf``; applies at P = 64, D = 128, 4 warps, pp=1, elsewhere a no-op): keys and Q^T in the wgmma A
# fragment's channel and token order (nibble_words._key_frag), so the dequantized key tile needs no shared-memory round
# trip (sm_90 SASS: 8 STS.128 + 8 LDSM and 2 barriers a page fewer). H200, session 8: 5-14% faster than without in
# Llama-3-8B cells (128k x 1, nq=5: 155.9 -> 137.2 us), 3-8% at pycode-30m batch 32-128, 2% slower at 15k x 1
# (bench/results/dev_kernels_kf.log), so on by default; key_frag=False turns it off.
KEY_FRAG = True
SCORE_BLOCK = 1024  # (head, page) pairs per score program of the merge launch
SCORE_TILE_VEC = True  # the merge's score programs load [pairs, 2G] tiles (verify_merge._score_tile's VEC)
# engine="gluon": how the ring launch (split 0, this module's kernel) and the Gluon page launch share the GPU:
# "early": ring first, releasing the page launch at once (both side by side); "serial": ring first, the page launch
# when it ends; "last" (default): the page launch first (it waits for the stream, then releases), the ring launch
# after it without waiting at its start (its programs take SM slots as page programs end), at its end waiting for
# it. H100, same runs (bench/results/s25/order): "early" left page programs that shared an SM with the ring
# programs up to ~9 µs behind (s25/prof); "last" is 4-5% faster at Llama-3-8B batch 8 (128k x 8 793 -> 770 µs),
# 1.5-2.5% at batch 32, 8-26% at batch 1 (128k x 1 133 -> 116 µs) and 8-14% at pycode-30m batch 32 / 64
RING_ORDER = "last"
# MAX_BLOCK_ROWS: the widest row tile block_rows picks for a long window when the launch need not be batch-invariant.
# 32 is the tile Llama-3-8B's G = 4 verify has always used (255 registers, no spills at 4 warps); for pycode-30m's
# G = 2 it holds γ+1 <= 16 rows in one block, where the G-only tile of 16 rows needs two blocks from γ = 8 on and
# so reads every page twice (bench/NOTES_kernels.md, "Row tiles for long windows").
MAX_BLOCK_ROWS = 32


# engine="gluon", batch_invariant=False (every batch): the ring split runs as a Gluon launch (kernels/
# verify_ring_gluon.py) instead of the Triton ring launch: ~16-bit MMAs instead of tf32 dots, which sat on the critical
# path at short contexts. H100, batch 1, same runs (bench/results/s31/gluon_ring), Triton ring launch / ring as a
# program of the page launch (session 30) / this: nq 5 P 64 8k 25.0-29.1 / 21.2-22.0 / 22.4-22.8 µs, 256k
# 209.9-210.1 / 209.6-209.8 / 209.8-210.0; nq 5 P 128 32k 51.1-51.4 / 41.9-42.0 / 41.3-41.7, 128k 111.8-111.9 /
# 112.6-112.7 / 111.7; nq 8 P 64 8k 29.5 / 23.6 / 24.7, 256k 216.7 / 225.3 / 217.3. Beyond batch 1 (session 32,
# bench/results/s32/ring_beyond_b1, Triton ring launch / this, µs): Llama-3-8B nq 5 4k x 4 33.6-33.8 / 29.2-29.4,
# 8k x 2 32.5-34.1 / 28.2-28.4, 16k x 16 P 128 208.5-208.7 / 203.3, 8k x 64 418.8-419.2 / 415.4, 128k x 8 and
# 256k x 8 equal within 0.2%; nq 8 8k x 32 228.4-229.0 / 223.2-224.9, 128k x 8 equal within the run's noise;
# pycode-30m (G = 2, nq 13) 4k x 32 51.2-52.1 / 48.4-48.8, 15k x 16 P 128 74.2-75.1 / 71.7. Batch-invariant launches
# keep the Triton ring split (deterministic inference is not re-measured with this launch).
GLUON_RING = True


def gluon_ring_rule(gluon: bool, batch_invariant: bool, num_splits) -> bool:
    """Whether the ring split runs as the Gluon launch (GLUON_RING): the Gluon engine at any batch, except
    batch-invariant launches and the dev form with a fixed split count (which keep the Triton ring launch)."""
    return gluon and GLUON_RING and not batch_invariant and num_splits is None


def merge_block_s(S1: int) -> int:
    """The merge's split tile for S1 partials a row: all of them where S1 <= MERGE_ONE_STEP_MAX (one step), else
    MERGE_BLOCK_S a loop step."""
    return max(MERGE_BLOCK_S, triton.next_power_of_2(S1)) if S1 <= MERGE_ONE_STEP_MAX else MERGE_BLOCK_S


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def block_rows(group: int, nq: int = 0) -> int:
    """Rows per program. ``nq = 0`` (batch-invariant launches): 8 window positions of G heads, padded to a tl.dot
    tile, >= 2G (both score rows), never NQ-dependent. ``nq > 0``: the same, except that a window of more rows gets
    one tile of up to MAX_BLOCK_ROWS rows instead of several row blocks (each of which reads every page again)."""
    base = max(min(64, max(16, triton.next_power_of_2(8 * group))), triton.next_power_of_2(2 * group))
    if nq * group <= base:
        return base
    return max(base, min(MAX_BLOCK_ROWS, triton.next_power_of_2(nq * group)))


@triton.jit
def _online_step(s, m, l):
    """Online-softmax step on masked log2 logits s [M, N] (ring pages); m starts at -1e30 so a masked tile is an
    exact no-op."""
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp2(m - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, alpha, p, l * alpha + tl.sum(p, 1)


@triton.jit(do_not_specialize=["NQ", "RB", "ra", "rb", "n_front", "lo_r", "hi_r"])
def _verify_attention_kernel(
    Q, KU, KL, VU, VL, KS, KZ, VS, VZ, PT, QSTART, HK, HV, HSLOT, PM, PL, PACC, RAW,
    qk_scale, NQ, HQ, S1, C, NS, RB, ra, rb, n_front, lo_r, hi_r,
    sq_b, sq_n, sq_h, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, spt_b, spt_j,
    shk_s, shk_r, shk_n, shk_h, sr_b, sr_h,
    G: tl.constexpr, P: tl.constexpr, DH: tl.constexpr, BLOCK_DH: tl.constexpr, BLOCK_M: tl.constexpr,
    HAS_SCORES: tl.constexpr, PP: tl.constexpr, QA: tl.constexpr, USE_ASM: tl.constexpr, SCORE_LSE: tl.constexpr,
    KF: tl.constexpr = False, PDL: tl.constexpr = False, EARLY_LAUNCH: tl.constexpr = False,
    AFTER_PAGES: tl.constexpr = False,
):
    if not AFTER_PAGES:  # AFTER_PAGES: the page launch before this one waited for the stream
        _wait_prior(PDL)
    _release_dependents(EARLY_LAUNCH)  # engine="gluon": the page launch after this ring launch reads nothing it writes
    # NQ-dependent scalars are never specialized: NQ = 1 (decode) and NQ = γ+1 (verify) compile to the same code
    # (pointer/stride alignment specializations aside, which change no arithmetic).
    pid_hr = tl.program_id(0)
    split = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    h = pid_hr // RB
    rblk = pid_hr % RB
    q_start = tl.load(QSTART + b)
    n_req = (q_start + NQ - 1) // P  # INT8 pages the window needs; also the window's last logical page
    Cb = _split_pages(q_start, C, NS, P)
    j0 = (split - 1) * Cb
    if (split == 0) | (j0 < n_req):
        # ---- rows: slot order (ra, rb, the others ascending) keeps both score rows in row block 0 --------------
        r = rblk * BLOCK_M + tl.arange(0, BLOCK_M)
        slot = r // G
        g = r % G
        row_ok = slot < NQ
        k = slot - n_front
        k = k + (k >= lo_r).to(tl.int32)
        k = k + ((k >= hi_r) & (hi_r != lo_r)).to(tl.int32)
        i = tl.where(slot == 0, ra, tl.where((slot == 1) & (n_front == 2), rb, k))
        i = tl.where(row_ok, i, 0)
        pos = q_start + i
        own_page = pos // P
        hq = h * G + g
        h64 = h.to(tl.int64)
        dh = tl.arange(0, BLOCK_DH)
        if BLOCK_DH == DH:  # a splat mask keeps the loads vectorized
            dmask = tl.full([BLOCK_DH], 1, tl.int1)
        else:
            dmask = dh < DH
        n = tl.arange(0, P)
        q_row = Q + b * sq_b + i.to(tl.int64) * sq_n + hq.to(tl.int64) * sq_h  # [BLOCK_M]
        qmask = row_ok[:, None] & dmask[None, :]
        if split == 0:
            # ---- full-precision ring pages of the window (<= 2); a row reads only its own page, tokens <= pos ----
            # fp32 operands: fp16/bf16 -> tf32 is exact, so q·k products are exact; the ring is tiny next to the
            # pages, so the slower tf32 MMA costs nothing measurable (and the interpreter cannot dot bf16).
            q_lo = tl.load(q_row[:, None] + dh[None, :], mask=qmask, other=0.0).to(tl.float32)
            q_hi = tl.load(q_row[:, None] + dh[None, :] + DH, mask=qmask, other=0.0).to(tl.float32)
            m = tl.full([BLOCK_M], -1.0e30, tl.float32)
            l = tl.zeros([BLOCK_M], tl.float32)
            acc_lo = tl.zeros([BLOCK_M, BLOCK_DH], tl.float32)
            acc_hi = tl.zeros([BLOCK_M, BLOCK_DH], tl.float32)
            hslot = tl.load(HSLOT + b).to(tl.int64)
            max_pos = q_start + NQ - 1
            for L in tl.range(q_start // P, n_req + 1, num_stages=1):  # <= 2 iterations
                tok = L * P + n
                tmask = tok <= max_pos  # ring entries past the window are stale: never loaded
                hbase = hslot * shk_s + (L % 2) * shk_r + h64 * shk_h  # R = RING = 2
                kt_ptr = HK + hbase + n[None, :].to(tl.int64) * shk_n + dh[:, None]  # K^T tile [BLOCK_DH, P]
                kmask = dmask[:, None] & tmask[None, :]
                kt_lo = tl.load(kt_ptr, mask=kmask, other=0.0).to(tl.float32)
                kt_hi = tl.load(kt_ptr + DH, mask=kmask, other=0.0).to(tl.float32)
                s = tl.dot(q_lo, kt_lo, input_precision="tf32")
                s = tl.dot(q_hi, kt_hi, s, input_precision="tf32") * qk_scale
                vis = (row_ok & (own_page == L))[:, None] & (tok[None, :] <= pos[:, None])
                s = tl.where(vis, s, float("-inf"))
                m, alpha, p, l = _online_step(s, m, l)
                v_ptr = HV + hbase + n[:, None].to(tl.int64) * shk_n + dh[None, :]
                vmask = tmask[:, None] & dmask[None, :]
                v_lo = tl.load(v_ptr, mask=vmask, other=0.0).to(tl.float32)
                v_hi = tl.load(v_ptr + DH, mask=vmask, other=0.0).to(tl.float32)
                acc_lo = tl.dot(p, v_lo, acc_lo * alpha[:, None], input_precision="tf32")
                acc_hi = tl.dot(p, v_hi, acc_hi * alpha[:, None], input_precision="tf32")
        else:
            # ---- INT8 view of logical pages [j0, j1), next page prefetched ------------------------------------------
            # Q (QA: [BLOCK_M, BLOCK_DH] halves, the A operand) or Q^T ([BLOCK_DH, BLOCK_M], the B operand) in fp16:
            # bf16 -> fp16 is exact for |q| in [2^-14, 65504] (far-subnormal components are rounded).
            if QA == 2:  # both halves interleaved: column 2c + t = channel t * DH + c
                dc = tl.arange(0, 2 * BLOCK_DH)
                qc_ok = row_ok[:, None] & (dc // 2 < DH)[None, :]
                qt_lo = tl.load(q_row[:, None] + ((dc % 2) * DH + dc // 2)[None, :], mask=qc_ok, other=0.0)
                qt_lo = qt_lo.to(tl.float16)
                qt_hi = qt_lo
            elif QA:
                qt_lo = tl.load(q_row[:, None] + dh[None, :], mask=qmask, other=0.0).to(tl.float16)
                qt_hi = tl.load(q_row[:, None] + dh[None, :] + DH, mask=qmask, other=0.0).to(tl.float16)
            else:  # KF: Q^T's rows in the key fragment's channel order (nibble_words._key_frag)
                qt_ok = dmask[:, None] & row_ok[None, :]
                qd = key_frag_channels(BLOCK_DH) if KF else dh
                qt_lo = tl.load(q_row[None, :] + qd[:, None], mask=qt_ok, other=0.0).to(tl.float16)
                qt_hi = tl.load(q_row[None, :] + qd[:, None] + DH, mask=qt_ok, other=0.0).to(tl.float16)
            offs_w = tl.arange(0, BLOCK_DH // 4)
            w_ok = offs_w < DH // 4
            j1 = tl.minimum(j0 + Cb, n_req)
            n_scored = q_start // P  # pages j < q_start // P get a score (every row sees all of them)
            score_lim = tl.where(rblk == 0, n_scored, 0)
            raw_row = RAW + b * sr_b + h64 * sr_h + r  # [BLOCK_M]: raw maxima [B, Hkv, MAXP, 2G], rows r < 2G
            raw_ok = row_ok & (slot < n_front)
            pt_row = PT + b * spt_b
            m_r = tl.full([BLOCK_M], -1.0e30, tl.float32)
            l_t = tl.zeros([P, BLOCK_M], tl.float32)
            z_t = tl.zeros([P, BLOCK_M], tl.float32)
            at_lo = tl.zeros([BLOCK_DH, BLOCK_M], tl.float32)
            at_hi = tl.zeros([BLOCK_DH, BLOCK_M], tl.float32)
            ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz = _load_page(
                KU, KL, VU, VL, KS, KZ, VS, VZ, tl.load(pt_row + j0 * spt_j, mask=j0 < j1, other=0), j0 < j1, h64,
                s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, n, offs_w, w_ok, DH // 4, QA)
            if QA:  # rows as the MMA M dimension (kernels/verify_pages.py, _rows_page)
                l_i = tl.zeros([BLOCK_M], tl.float32)
                a_lo = tl.zeros([BLOCK_M, QA * BLOCK_DH], tl.float32)  # QA == 2: the whole interleaved O
                a_hi = tl.zeros([BLOCK_M, BLOCK_DH], tl.float32)
                pg_next = tl.load(pt_row + (j0 + 1) * spt_j, mask=j0 + 1 < j1, other=0)
                for j in tl.range(j0, j1, PP, num_stages=1):  # PP = 2: unrolled, buffers alternate (no copies)
                    nku, nkl, nvu, nvl, nks_lo, nks_hi, nkz_lo, nkz_hi, nvs, nvz = _load_page(
                        KU, KL, VU, VL, KS, KZ, VS, VZ, pg_next, j + 1 < j1, h64, s_wp, s_wh, s_sp, s_sh, s_vp,
                        s_vh, n, offs_w, w_ok, DH // 4, True)
                    pg_next = tl.load(pt_row + (j + 2) * spt_j, mask=j + 2 < j1, other=0)
                    m_r, l_i, a_lo, a_hi = _rows_page(
                        m_r, l_i, a_lo, a_hi, qt_lo, qt_hi, qk_scale, ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi,
                        vs, vz, j, n_scored, j1, score_lim, row_ok & (j < own_page), raw_row + j * (2 * G),
                        raw_ok, HAS_SCORES, QA == 2, USE_ASM, SCORE_LSE)
                    if PP == 2:  # page j + 1 (an exact no-op past j1) from the second buffer
                        ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz = _load_page(
                            KU, KL, VU, VL, KS, KZ, VS, VZ, pg_next, j + 2 < j1, h64, s_wp, s_wh, s_sp, s_sh, s_vp,
                            s_vh, n, offs_w, w_ok, DH // 4, True)
                        pg_next = tl.load(pt_row + (j + 3) * spt_j, mask=j + 3 < j1, other=0)
                        m_r, l_i, a_lo, a_hi = _rows_page(
                            m_r, l_i, a_lo, a_hi, qt_lo, qt_hi, qk_scale, nku, nkl, nvu, nvl, nks_lo, nks_hi, nkz_lo,
                            nkz_hi, nvs, nvz, j + 1, n_scored, j1, score_lim, row_ok & (j + 1 < own_page),
                            raw_row + (j + 1) * (2 * G), raw_ok, HAS_SCORES, QA == 2, USE_ASM, SCORE_LSE)
                    else:
                        ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz = \
                            nku, nkl, nvu, nvl, nks_lo, nks_hi, nkz_lo, nkz_hi, nvs, nvz
            elif PP == 1:
                pg_next = tl.load(pt_row + (j0 + 1) * spt_j, mask=j0 + 1 < j1, other=0)
                for j in tl.range(j0, j1, num_stages=1):
                    nku, nkl, nvu, nvl, nks_lo, nks_hi, nkz_lo, nkz_hi, nvs, nvz = _load_page(
                        KU, KL, VU, VL, KS, KZ, VS, VZ, pg_next, j + 1 < j1, h64, s_wp, s_wh, s_sp, s_sh, s_vp,
                        s_vh, n, offs_w, w_ok, DH // 4)
                    pg_next = tl.load(pt_row + (j + 2) * spt_j, mask=j + 2 < j1, other=0)
                    m_r, l_t, z_t, at_lo, at_hi = _int8_page(
                        m_r, l_t, z_t, at_lo, at_hi, qt_lo, qt_hi, qk_scale, ku, kl, vu, vl, ks_lo, ks_hi, kz_lo,
                        kz_hi, vs, vz, j, n_scored, j1, score_lim, row_ok & (j < own_page), raw_row + j * (2 * G),
                        raw_ok, HAS_SCORES, USE_ASM, SCORE_LSE, KF)
                    ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz = \
                        nku, nkl, nvu, nvl, nks_lo, nks_hi, nkz_lo, nkz_hi, nvs, nvz
            else:  # two pages an iteration (j, j + 1), the next pair prefetched
                ku2, kl2, vu2, vl2, ks_lo2, ks_hi2, kz_lo2, kz_hi2, vs2, vz2 = _load_page(
                    KU, KL, VU, VL, KS, KZ, VS, VZ, tl.load(pt_row + (j0 + 1) * spt_j, mask=j0 + 1 < j1, other=0),
                    j0 + 1 < j1, h64, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, n, offs_w, w_ok, DH // 4)
                pg_next = tl.load(pt_row + (j0 + 2) * spt_j, mask=j0 + 2 < j1, other=0)
                pg_next2 = tl.load(pt_row + (j0 + 3) * spt_j, mask=j0 + 3 < j1, other=0)
                for j in tl.range(j0, j1, 2, num_stages=1):
                    nku, nkl, nvu, nvl, nks_lo, nks_hi, nkz_lo, nkz_hi, nvs, nvz = _load_page(
                        KU, KL, VU, VL, KS, KZ, VS, VZ, pg_next, j + 2 < j1, h64, s_wp, s_wh, s_sp, s_sh, s_vp,
                        s_vh, n, offs_w, w_ok, DH // 4)
                    nku2, nkl2, nvu2, nvl2, nks_lo2, nks_hi2, nkz_lo2, nkz_hi2, nvs2, nvz2 = _load_page(
                        KU, KL, VU, VL, KS, KZ, VS, VZ, pg_next2, j + 3 < j1, h64, s_wp, s_wh, s_sp, s_sh, s_vp,
                        s_vh, n, offs_w, w_ok, DH // 4)
                    pg_next = tl.load(pt_row + (j + 4) * spt_j, mask=j + 4 < j1, other=0)
                    pg_next2 = tl.load(pt_row + (j + 5) * spt_j, mask=j + 5 < j1, other=0)
                    m_r, l_t, z_t, at_lo, at_hi = _int8_pair(
                        m_r, l_t, z_t, at_lo, at_hi, qt_lo, qt_hi, qk_scale, ku, kl, vu, vl, ks_lo, ks_hi, kz_lo,
                        kz_hi, vs, vz, ku2, kl2, vu2, vl2, ks_lo2, ks_hi2, kz_lo2, kz_hi2, vs2, vz2, j, n_scored, j1,
                        score_lim, row_ok & (j < own_page), row_ok & (j + 1 < own_page), raw_row + j * (2 * G),
                        raw_ok, G, HAS_SCORES, USE_ASM, SCORE_LSE)
                    ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz = \
                        nku, nkl, nvu, nvl, nks_lo, nks_hi, nkz_lo, nkz_hi, nvs, nvz
                    ku2, kl2, vu2, vl2, ks_lo2, ks_hi2, kz_lo2, kz_hi2, vs2, vz2 = \
                        nku2, nkl2, nvu2, nvl2, nks_lo2, nks_hi2, nkz_lo2, nkz_hi2, nvs2, nvz2
            m = m_r * qk_scale
            if QA == 2:
                l = l_i
                acc_lo, acc_hi = tl.split(tl.reshape(a_lo, (BLOCK_M, BLOCK_DH, 2)))
            elif QA:
                l = l_i
                acc_lo = a_lo
                acc_hi = a_hi
            else:
                l = tl.sum(l_t, 0)
                zs = tl.sum(z_t, 0)
                acc_lo = tl.trans(at_lo * 0.0625 + zs[None, :])
                acc_hi = tl.trans(at_hi * 0.0625 + zs[None, :])

        # ---- partials [B, NQ, Hq, S1] (m, l) and [B, NQ, Hq, S1, 2*DH] (acc) ------------------------------------
        prow = ((b * NQ + i.to(tl.int64)) * HQ + hq.to(tl.int64)) * S1 + split
        tl.store(PM + prow, m, mask=row_ok)
        tl.store(PL + prow, l, mask=row_ok)
        a_ptr = PACC + prow[:, None] * (2 * DH) + dh[None, :]
        tl.store(a_ptr, acc_lo, mask=qmask)
        tl.store(a_ptr + DH, acc_hi, mask=qmask)
    if AFTER_PAGES:  # end only after the page launch, for the merge's sake
        _wait_prior(PDL)


def key_frag_on(key_frag, P, DH, num_warps, pp, qa) -> bool:
    """The kernel's KF: the ``key_frag`` keyword (None: KEY_FRAG) where the tile is the one nibble_words' fragment
    helpers hard-code, one page an iteration, tokens as the MMA M dimension."""
    return bool(KEY_FRAG if key_frag is None else key_frag) and key_frag_fits(P, DH, num_warps) and pp == 1 and not qa


def verify_attention(q, store, page_table, q_start, hot_k, hot_v, hot_slot, sm_scale, scores=None, score_rows=None,
                     out=None, score_kind="max", batch_invariant=True, maxnreg=None, pages_per_iter=None,
                     num_warps=None, rows_as_m=None, num_splits=None, key_frag=None, block_m=None, engine=None,
                     gluon_ring=None):
    """See docs/CONTRACTS.md. ``batch_invariant``: the page partition of a row independent of the batch (module
    docstring). ``maxnreg``, ``pages_per_iter``, ``num_warps``, ``rows_as_m``, ``num_splits`` (keywords, optional)
    override the module's MAXNREG / PAGES_PER_ITER / NUM_WARPS / ROWS_AS_M and the split rule (dev timing);
    ``key_frag`` the module's KEY_FRAG; ``block_m`` the row tile (default: block_rows).
    ``engine="gluon"``: the INT8 page splits run as kernels/verify_pages_gluon.py (four warps, four pages a step;
    where verify_pages_gluon.gluon_verify_support says they run), the ring split and the merge as here; the same
    page partition, so the same partials and scores. None / "triton": this module's kernel. ``gluon_ring`` (Gluon
    only; None: the GLUON_RING rule): the ring split as a Gluon launch (kernels/verify_ring_gluon.py) instead of the
    Triton one."""
    # ---- checks ----------------------------------------------------------------------------------------------------
    B, NQ, Hq, D = q.shape
    NPAGES, Hkv, P, DH = store.k_upper.shape
    assert q.dtype in (torch.float16, torch.bfloat16), q.dtype
    assert D == 2 * DH and DH >= 16 and DH % 4 == 0 and Hq % Hkv == 0 and 1 <= NQ <= P, \
        (q.shape, store.k_upper.shape)  # DH % 4: the planes are read as int32 words
    G = Hq // Hkv
    assert q.stride(3) == 1
    planes = (store.k_upper, store.k_lower, store.v_upper, store.v_lower)
    for t in planes:
        assert t.dtype == torch.uint8 and t.shape == planes[0].shape and t.stride() == planes[0].stride()
    assert planes[0].stride(3) == 1 and planes[0].stride(2) == DH, "packed [P, D/2] page rows"
    words = [t.view(torch.int32) for t in planes]  # 4 packed bytes per word
    for s_, z_, shape in ((store.k_scale, store.k_zero, (NPAGES, Hkv, D)), (store.v_scale, store.v_zero,
                                                                             (NPAGES, Hkv, P))):
        assert s_.dtype == z_.dtype == torch.float16 and s_.shape == z_.shape == shape and s_.stride() == z_.stride()
        assert s_.stride(2) == 1
    ks32, kz32 = store.k_scale.view(torch.int32), store.k_zero.view(torch.int32)  # fp16 pairs of channels
    MAXP = page_table.shape[1]
    assert page_table.shape == (B, MAXP) and page_table.dtype in (torch.int32, torch.int64)
    assert q_start.shape == (B,) and q_start.dtype == torch.int32
    assert hot_slot.shape == (B,) and hot_slot.dtype in (torch.int32, torch.int64)
    assert hot_k.dim() == 5 and hot_k.shape[1:] == (RING, P, Hkv, D) and hot_k.dtype == q.dtype
    assert hot_v.shape == hot_k.shape and hot_v.dtype == q.dtype and hot_v.stride() == hot_k.stride()
    assert hot_k.stride(4) == 1
    if scores is not None:
        assert scores.shape == (B, Hkv, MAXP) and scores.dtype == torch.float32, (scores.shape, scores.dtype)
    ra, rb = default_score_rows(NQ, score_rows)
    assert score_kind in SCORE_KINDS, score_kind
    lse = score_kind == "lse"
    # ---- allocate ----------------------------------------------------------------------------------------------------
    if out is None:
        out = torch.empty_like(q)
    assert out.shape == q.shape and out.dtype == q.dtype and out.stride(3) == 1
    if B == 0:
        return out
    if engine not in (None, "triton", "gluon"):
        raise ValueError(f"verify_attention: engine must be 'triton' or 'gluon', got {engine!r}")
    gluon = engine == "gluon"
    if gluon:
        from sgl_spec.kernels import verify_pages_gluon as vg
        why = vg.gluon_verify_shapes(P, DH, G, NQ) or (
            "" if q.is_cuda and not _interpreting() else f"the Gluon verify kernel does not run on {q.device}")
        if why:
            raise ValueError(f"verify_attention: engine='gluon': {why}")
    nw = NUM_WARPS if num_warps is None else num_warps
    pp = PAGES_PER_ITER if pages_per_iter is None else pages_per_iter
    qa = int(ROWS_AS_M if rows_as_m is None else rows_as_m)  # 0 off, 1 on (D in two halves), 2 on (interleaved)
    assert pp in (1, 2) and nw in (4, 8) and qa in (0, 1, 2), (pp, nw, qa)
    if qa:  # key scales / zeros read as int64 words (4 channels): 8-byte aligned rows
        assert all(t.data_ptr() % 8 == 0 and t.stride(0) % 4 == 0 and t.stride(1) % 4 == 0
                   for t in (store.k_scale, store.k_zero))
    # batch-invariant launches keep the G-only tile (a row's arithmetic must not depend on NQ); otherwise a long
    # window fits one row block where it can (block_rows)
    bm = block_rows(G, 0 if batch_invariant else NQ) if block_m is None else int(block_m)
    assert bm >= max(16, 2 * G) and bm & (bm - 1) == 0, (bm, G)  # a dot tile holding both score rows
    BLOCK_M = max(64, bm) if qa else bm  # QA: a wgmma warpgroup's M of 64 rows
    RB = triton.cdiv(NQ * G, BLOCK_M)
    pps = vg.PROGRAMS_PER_SM if gluon else max(1, splits.PROGRAMS_PER_SM * 4 // nw)
    c_min = max(1, splits.MIN_TOKENS_PER_SPLIT // P)
    if num_splits is not None:
        C, NS = c_min, max(1, int(num_splits))
    elif batch_invariant:
        C = splits.pages_per_split(Hkv, MAXP, P, q.device, pps)
        NS = triton.cdiv(MAXP, C)  # then C_b = C for every q_start < MAXP * P
    else:
        C, NS = c_min, splits.splits_for_batch(B * Hkv * (1 if gluon else RB), triton.cdiv(MAXP, c_min), q.device,
                                               pps, ring_in_grid=None if gluon else True)
    if gluon_ring is None:
        gluon_ring = gluon_ring_rule(gluon, batch_invariant, num_splits)
    elif gluon_ring and not gluon:
        raise ValueError("verify_attention: gluon_ring needs engine='gluon'")
    S1 = 1 + NS  # split 0 = ring, then page splits
    assert S1 < 65536 and B < 65536, "grid axes 1 and 2 are limited to 65535"
    pm = torch.empty((B, NQ, Hq, S1), dtype=torch.float32, device=q.device)
    pl = torch.empty_like(pm)
    pacc = torch.empty((B, NQ, Hq, S1, D), dtype=torch.float32, device=q.device)
    sc = scores if scores is not None else pm  # dummy pointer for the merge, never touched without scores
    nr = MAXNREG if maxnreg is None else maxnreg
    direct = gluon and scores is not None and vg.direct_scores(lse, P)  # the Gluon page programs store the scores
    raw_on = scores is not None and not direct
    # raw column maxima of the score rows [B, Hkv, MAXP, 2G]; only entries of scored pages are written and read
    raw = torch.empty((B, Hkv, MAXP, 2 * G) if raw_on else (1, 1, 1, 1), dtype=torch.float32, device=q.device)
    # ---- launch ------------------------------------------------------------------------------------------------------
    order = RING_ORDER if gluon else "early"
    qk_scale = float(sm_scale) * LOG2E  # the logits in log2 units (every launch's partials: m in these units)
    if gluon:  # the Gluon page splits 1..NS (verify_pages_gluon.launch_pages)
        def pages(first):
            vg.launch_pages(q, words, ks32, kz32, store, page_table, q_start, pm, pl, pacc, raw,
                            qk_scale, S1, C, NS, ra, rb, scores is not None, lse,
                            scores=scores if direct else None, sm_scale=sm_scale, first=first)
    if gluon_ring:  # the page launch releases the Gluon ring launch at its start
        from sgl_spec.kernels.verify_ring_gluon import launch_ring

        pages(True)
        launch_ring(q, hot_k, hot_v, hot_slot, q_start, pm, pl, pacc, qk_scale, S1, ra, rb)
    else:
        if gluon and order == "last":
            pages(True)
        # Triton stage 1: the ring split and the page splits, or with the Gluon engine the ring split (0) only
        _verify_attention_kernel[(Hkv * RB, 1 if gluon else S1, B)](
            Q=q, KU=words[0], KL=words[1], VU=words[2], VL=words[3], KS=ks32, KZ=kz32, VS=store.v_scale,
            VZ=store.v_zero, PT=page_table, QSTART=q_start, HK=hot_k, HV=hot_v,
            HSLOT=hot_slot, PM=pm, PL=pl, PACC=pacc, RAW=raw,
            qk_scale=qk_scale, NQ=NQ, HQ=Hq, S1=S1, C=C, NS=NS, RB=RB, ra=ra, rb=rb,
            n_front=1 if ra == rb else 2, lo_r=min(ra, rb), hi_r=max(ra, rb),
            sq_b=q.stride(0), sq_n=q.stride(1), sq_h=q.stride(2),
            s_wp=words[0].stride(0), s_wh=words[0].stride(1), s_sp=ks32.stride(0), s_sh=ks32.stride(1),
            s_vp=store.v_scale.stride(0), s_vh=store.v_scale.stride(1),
            spt_b=page_table.stride(0), spt_j=page_table.stride(1),
            shk_s=hot_k.stride(0), shk_r=hot_k.stride(1), shk_n=hot_k.stride(2), shk_h=hot_k.stride(3),
            sr_b=raw.stride(0), sr_h=raw.stride(1), G=G, P=P, DH=DH, BLOCK_DH=triton.next_power_of_2(DH),
            BLOCK_M=BLOCK_M, HAS_SCORES=raw_on, PP=pp, QA=qa, USE_ASM=not _interpreting(), SCORE_LSE=lse,
            KF=key_frag_on(key_frag, P, DH, nw, pp, qa), EARLY_LAUNCH=gluon and order == "early",
            AFTER_PAGES=order == "last",
            num_warps=nw, num_stages=1, **({"maxnreg": nr} if nr and q.is_cuda else {}), **pdl_kwargs(q.device),
        )
        if gluon and order != "last":
            pages(False)
    BLOCK_D = triton.next_power_of_2(D)
    BLOCK_S = merge_block_s(S1)
    BLOCK_H = max(1, min(triton.next_power_of_2(Hq), MERGE_TILE // (BLOCK_S * BLOCK_D)))
    n_hb = triton.cdiv(Hq, BLOCK_H)
    block_sj = min(SCORE_BLOCK, triton.next_power_of_2(Hkv * MAXP))
    n_sc = triton.cdiv(triton.cdiv(Hkv * MAXP, block_sj), NQ) if raw_on else 0  # score tiles over (pid0, pid1)
    _verify_merge_kernel[(n_hb + n_sc, NQ, B)](
        PM=pm, PL=pl, PACC=pacc, QSTART=q_start, OUT=out, RAW=raw, SCORES=sc, NQ=NQ, HQ=Hq, S1=S1, C=C, NS=NS,
        so_b=out.stride(0), so_n=out.stride(1), so_h=out.stride(2),
        n_front=1 if ra == rb else 2, sm_scale=float(sm_scale), HKV=Hkv, MAXP=MAXP, sr_b=raw.stride(0),
        ssc_b=sc.stride(0), ssc_h=sc.stride(1), ssc_j=sc.stride(2),
        P=P, D=D, BLOCK_D=BLOCK_D, BLOCK_H=BLOCK_H, BLOCK_S=BLOCK_S, G=G, N_HB=n_hb, BLOCK_SJ=block_sj,
        SCORE_LSE=lse, ONE_STEP=S1 <= BLOCK_S, VEC=SCORE_TILE_VEC and (G & (G - 1)) == 0, num_warps=4,
        **pdl_kwargs(q.device),
    )
    return out

