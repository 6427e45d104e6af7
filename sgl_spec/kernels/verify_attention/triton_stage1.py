"""Stage 1 of the Triton ``verify_attention`` (``triton.py`` launches it; with the Gluon engine only its ring
split): partials (m, l, unnormalized acc) per (row, split), and the raw page-score values. Semantics:
docs/CONTRACTS.md; the design rules and their figures: docs/KERNELS.md, "verify_attention".

Grid ``(Hkv * RB, 1 + S, B)``:
* a program owns ``BLOCK_M`` query rows of one KV head: row ``r = slot * G + g`` (``g`` = query head of the group,
  ``slot`` = window row, the two score rows first). With ``batch_invariant=True``, ``BLOCK_M`` depends on ``G``
  only (rows for 8 window positions, 16…64, at least 2G), never on NQ, and NQ-dependent scalars are not specialized:
  a row goes through the same tiles and the same operations whether it is verified with γ others (NQ = γ+1) or
  decoded alone (NQ = 1). ``RB = cdiv(NQ*G, BLOCK_M)`` row blocks sit next to each other on grid axis 0, so they
  read a page through L2 once. Otherwise (the server's default) a window of more rows than that tile gets one tile
  of up to MAX_BLOCK_ROWS rows, since each extra row block repeats the whole page loop.
* split 0 reads the ring (full precision, ≤ 2 pages, one page per iteration, rows as the MMA M dimension); split
  ``s ≥ 1`` reads logical pages ``[(s-1)C_b, sC_b)`` through the INT8 view, ``C_b = max(C, cdiv(q_start // P + 1,
  NS))`` for ``NS`` page splits (pages a row must not see are exact no-ops for it: alpha = 1, p = 0).
  ``batch_invariant=True`` (``--enable-deterministic-inference``): ``C`` from Hkv, MAXP and the SM count only and
  ``NS = cdiv(MAXP, C)``, so ``C_b = C``: the page sequence a row sees is the same in every call that contains it.
  ``batch_invariant=False`` (the server's default): ``NS`` from B x Hkv (whole waves of programs, ``splits.py``)
  and ``C`` the smallest split, so each request's own pages are cut into ``NS`` near-equal splits. ``C_b`` follows
  B and the window's first page, so a row's result may then differ in fp32 rounding between batches, or between a
  verify window and a one-row decode at its position (the output stays the same attention).
* INT8 pages (``triton_pages.py``): the page's P tokens are the MMA's M dimension,
  ``S^T [P, BLOCK_M] = K [P, D] Q^T [D, BLOCK_M]`` with the keys dequantized to fp16 in registers (int32 words of
  both planes -> one fp16 FMA per pair, sgl_spec/kernels/common/int8_words.py), so Q^T is one constant operand for
  every page; and ``O^T [D, BLOCK_M] += (C_v - 128)^T [D, P] (p∘s_v)^T [P, BLOCK_M]`` with exact centred value
  codes; the value zero term and the row sums are accumulated per (token, row) and reduced once after the loop. Q
  keeps its own precision (bf16 -> fp16 is exact) and sm_scale·log2(e) is applied to the fp32 logits. Page i+1's
  words and scales are loaded into registers before page i is computed (num_stages=1): Triton's pipeliner, given
  the page-id load that addresses the tiles, waits for all outstanding cp.async copies every page.
* KF (P = 64, D = 128, 4 warps: ``nibble_words.key_frag_fits``): keys and Q^T in the wgmma A fragment's channel
  and token order, so the dequantized key tile needs no shared-memory round trip.
* page scores (``HAS_SCORES``): from the row block holding the score rows, per page ``j < q_start // P``: max over
  the page's tokens per row (the softmax's column max); the 2G score rows' maxima are stored as they lie in
  registers (no layout conversion) and stage 2 reduces them (max over the two rows, sum over the G heads). No
  atomics.
"""
import triton
import triton.language as tl

from sgl_spec.kernels.common.nibble_words import key_frag_channels
from sgl_spec.kernels.common.pdl import _wait_prior
from sgl_spec.kernels.verify_attention.triton_pages import _int8_page, _load_page
from sgl_spec.kernels.verify_attention.splits import _split_pages


@triton.jit
def _online_step(s, m, l):
    """Online-softmax step on masked log2 logits s [M, N] (ring pages); m starts at -1e30 so a masked tile is an
    exact no-op."""
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp2(m - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, alpha, p, l * alpha + tl.sum(p, 1)


@triton.jit(do_not_specialize=["NQ", "C", "NS", "RB", "ra", "rb", "n_front", "lo_r", "hi_r"])
def _verify_attention_kernel(
    Q, KU, KL, VU, VL, KS, KZ, VS, VZ, PT, QSTART, HK, HV, HSLOT, PM, PL, PACC, RAW,
    qk_scale, NQ, HQ, S1, C, NS, RB, ra, rb, n_front, lo_r, hi_r,
    sq_b, sq_n, sq_h, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, spt_b, spt_j,
    shk_s, shk_r, shk_n, shk_h, sr_b, sr_h,
    G: tl.constexpr, P: tl.constexpr, DH: tl.constexpr, BLOCK_DH: tl.constexpr, BLOCK_M: tl.constexpr,
    HAS_SCORES: tl.constexpr, USE_ASM: tl.constexpr, SCORE_LSE: tl.constexpr,
    KF: tl.constexpr = False, PDL: tl.constexpr = False, AFTER_PAGES: tl.constexpr = False,
):
    if not AFTER_PAGES:  # AFTER_PAGES: the Gluon page launch before this ring launch waited for the stream
        _wait_prior(PDL)
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
            # Q^T ([BLOCK_DH, BLOCK_M], the B operand) in fp16: bf16 -> fp16 is exact for |q| in [2^-14, 65504]
            # (far-subnormal components are rounded). KF: Q^T's rows in the key fragment's channel order
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
                s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, n, offs_w, w_ok, DH // 4)
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
            m = m_r * qk_scale
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
