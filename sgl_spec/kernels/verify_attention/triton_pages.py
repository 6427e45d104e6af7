"""INT8 page steps of ``verify_attention``'s Triton stage 1 (sgl_spec/kernels/verify_attention/triton_stage1.py): loading one page's words and
scales, and the online-softmax update of one page (or two) in either operand arrangement:

* ``_int8_page`` / ``_int8_pair`` (default): tokens as the MMA M dimension, ``S^T = K Q^T`` with dequantized keys
  in registers, ``O^T += (C_v - 128)^T (p∘s_v)`` with exact centred value codes; per (token, row) row sums and
  value zero terms.
* ``_rows_page`` (launcher keyword ``rows_as_m=True``): rows as the M dimension (BLOCK_M >= 64, one wgmma
  warpgroup owns 16 rows each warp), ``S = Q K^T`` and ``O += p V`` with K and V dequantized to fp16 in registers
  and written to shared memory as the wgmma B operands; p stays in registers as the A operand, row maxima and sums
  are intra-warp (no cross-warp reduction), and the value scale/zero are folded into the fp16 values (one rounding
  per value, the keys' class) so there is no separate zero term.
"""
from __future__ import annotations

import triton
import triton.language as tl

from sgl_spec.kernels.common.int8_words import keys_i8, keys_i8_v, prep_key_scales, values_deq, values_i8
from sgl_spec.kernels.common.nibble_words import _key_frag, _tok_perm


@triton.jit
def _load_page(KU, KL, VU, VL, KS, KZ, VS, VZ, pg, ok, h, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, n, offs_w, w_ok,
               W: tl.constexpr, W64: tl.constexpr = False):
    """One page's INT8 tiles for KV head h: the four planes as int32 words [P, BLOCK_W], the key scales/zeros as
    int32 fp16-pair tiles [BLOCK_W, 2] per half of D, the value scales/zeros fp16 [P]. ``ok`` False loads zeros."""
    pg = pg.to(tl.int64)
    tile = pg * s_wp + h * s_wh + n[:, None].to(tl.int64) * W + offs_w[None, :]
    m2 = ok & w_ok[None, :]
    ku = tl.load(KU + tile, mask=m2, other=0, cache_modifier=".cg")
    kl = tl.load(KL + tile, mask=m2, other=0, cache_modifier=".cg")
    vu = tl.load(VU + tile, mask=m2, other=0, cache_modifier=".cg")
    vl = tl.load(VL + tile, mask=m2, other=0, cache_modifier=".cg")
    if W64:  # (_rows_page) int64 vectors [BLOCK_W]: word w = the fp16 scales of channels 4w..4w+3, the low-half
        # channels of word w (high half at w + W); Triton loads them straight into the layout the dequantization
        # broadcasts them in (the [BLOCK_W, 2] tile below, 32 elements, is loaded one element a thread and goes
        # through shared memory every page)
        KS8 = KS.to(tl.pointer_type(tl.int64), bitcast=True)
        KZ8 = KZ.to(tl.pointer_type(tl.int64), bitcast=True)
        at = (pg * s_sp + h * s_sh) // 2 + offs_w  # s_sp, s_sh: int32 strides, even (checked by the launcher)
        m1 = ok & w_ok
        ks_lo = tl.load(KS8 + at, mask=m1, other=0, eviction_policy="evict_first")
        ks_hi = tl.load(KS8 + at + W, mask=m1, other=0, eviction_policy="evict_first")
        kz_lo = tl.load(KZ8 + at, mask=m1, other=0, eviction_policy="evict_first")
        kz_hi = tl.load(KZ8 + at + W, mask=m1, other=0, eviction_policy="evict_first")
    else:  # word 2w + t of k_scale / k_zero holds channels 4w + 2t, 4w + 2t + 1
        pair = pg * s_sp + h * s_sh + 2 * offs_w[:, None] + tl.arange(0, 2)[None, :]
        m1 = ok & w_ok[:, None]
        ks_lo = tl.load(KS + pair, mask=m1, other=0, eviction_policy="evict_first")
        ks_hi = tl.load(KS + pair + 2 * W, mask=m1, other=0, eviction_policy="evict_first")
        kz_lo = tl.load(KZ + pair, mask=m1, other=0, eviction_policy="evict_first")
        kz_hi = tl.load(KZ + pair + 2 * W, mask=m1, other=0, eviction_policy="evict_first")
    vrow = pg * s_vp + h * s_vh + n
    vs = tl.load(VS + vrow, mask=ok, other=0.0, eviction_policy="evict_first")
    vz = tl.load(VZ + vrow, mask=ok, other=0.0, eviction_policy="evict_first")
    return ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz


@triton.jit
def _page_logits(qt_lo, qt_hi, ku, kl, ks_lo, ks_hi, kz_lo, kz_hi, jj, n_scored, j1, vis, score_lim, raw_ptr,
                 raw_ok, HAS_SCORES: tl.constexpr, USE_ASM: tl.constexpr, SCORE_LSE: tl.constexpr = False,
                 KF: tl.constexpr = False):
    """Raw logits S^T = K Q^T [P, BLOCK_M] of logical page jj (masked to -inf for rows that must not see it, and
    for a page at or past the split's end j1) and their column maxima; the score rows' maxima are stored raw.
    KF: keys in ``_key_frag``'s order (Q^T's rows in ``key_frag_channels`` order; S^T rows in ``_tok_perm`` order)."""
    s16_lo, zz_lo = prep_key_scales(ks_lo, kz_lo, USE_ASM)
    s16_hi, zz_hi = prep_key_scales(ks_hi, kz_hi, USE_ASM)
    k_lo, k_hi = keys_i8(ku, kl, s16_lo, zz_lo, s16_hi, zz_hi, USE_ASM)
    if KF:
        k_lo = _key_frag(k_lo)
        k_hi = _key_frag(k_hi)
    s = tl.dot(k_lo, qt_lo)
    s = tl.dot(k_hi, qt_hi, s)  # [P, BLOCK_M] raw q·k
    if (jj >= n_scored) | (jj >= j1):  # rows' own pages start at q_start // P; jj >= j1: the odd page of a pair
        s = tl.where((vis & (jj < j1))[None, :], s, float("-inf"))
    cm = tl.max(s, 0)
    if HAS_SCORES and not SCORE_LSE:  # the raw column maxima of the score rows, in cm's layout; the merge sums heads
        tl.store(raw_ptr, cm, mask=raw_ok & (jj < score_lim) & (jj < j1))
    return s, cm


@triton.jit
def _page_lse(p, m_new, qk_scale, jj, j1, score_lim, raw_ptr, raw_ok):
    """score kind "lse": the page's log-sum-exp per row in raw q·k units, m_new + log2(Σ_tokens p) / qk_scale, from
    the softmax weights p = exp2((s - m_new)·qk_scale) the update computes anyway (one column sum more). A page more
    than ~149 log2-units below the row's running max underflows to -inf (the reference stays finite there: both
    rank such a page last)."""
    tl.store(raw_ptr, m_new + tl.log2(tl.sum(p, 0)) / qk_scale, mask=raw_ok & (jj < score_lim) & (jj < j1))


@triton.jit
def _int8_page(m_r, l_t, z_t, at_lo, at_hi, qt_lo, qt_hi, qk_scale, ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs,
               vz, j, n_scored, j1, score_lim, vis, raw_ptr, raw_ok, HAS_SCORES: tl.constexpr,
               USE_ASM: tl.constexpr, SCORE_LSE: tl.constexpr, KF: tl.constexpr = False):
    """Online-softmax update of every row (column) with one INT8 page, tokens as the MMA M dimension. m_r is the
    row's running max of the raw logits q·k (log2 units = m_r * qk_scale); l_t / z_t: per (token, row) running sums
    of p and p·(value zero term); at_*: O^T of the centred codes, weighted by p·s_v (16x the output's code part).
    KF: keys as ``_key_frag`` lays them out; the tokens of values and value scales follow (``_tok_perm``)."""
    s, cm = _page_logits(qt_lo, qt_hi, ku, kl, ks_lo, ks_hi, kz_lo, kz_hi, j, n_scored, j1, vis, score_lim,
                         raw_ptr, raw_ok, HAS_SCORES, USE_ASM, SCORE_LSE, KF)
    if KF:
        vs = _tok_perm(vs)
        vz = _tok_perm(vz)
    m_new = tl.maximum(m_r, cm)
    alpha = tl.exp2((m_r - m_new) * qk_scale)
    p = tl.exp2(s * qk_scale - (m_new * qk_scale)[None, :])
    if HAS_SCORES and SCORE_LSE:
        _page_lse(p, m_new, qk_scale, j, j1, score_lim, raw_ptr, raw_ok)
    vsf = vs.to(tl.float32)
    l_t = l_t * alpha[None, :] + p
    z_t = z_t * alpha[None, :] + p * (vz.to(tl.float32) + 7.53125 * vsf)[:, None]
    ps = (p * vsf[:, None]).to(tl.float16)  # [P, BLOCK_M]
    v_lo, v_hi = values_i8(vu, vl, USE_ASM)
    if KF:
        v_lo = _tok_perm(v_lo)
        v_hi = _tok_perm(v_hi)
    at_lo = tl.dot(tl.trans(v_lo), ps, at_lo * alpha[None, :])  # [BLOCK_DH, BLOCK_M]
    at_hi = tl.dot(tl.trans(v_hi), ps, at_hi * alpha[None, :])
    return m_new, l_t, z_t, at_lo, at_hi


@triton.jit
def _int8_pair(m_r, l_t, z_t, at_lo, at_hi, qt_lo, qt_hi, qk_scale, ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs,
               vz, ku2, kl2, vu2, vl2, ks_lo2, ks_hi2, kz_lo2, kz_hi2, vs2, vz2, j, n_scored, j1, score_lim, vis_a,
               vis_b, raw_ptr, raw_ok, G: tl.constexpr, HAS_SCORES: tl.constexpr, USE_ASM: tl.constexpr,
               SCORE_LSE: tl.constexpr):
    """``_int8_page`` for pages j (tiles ``ku``...) and j + 1 (tiles ``ku2``..., a no-op past j1) with one softmax
    update: one running-max step and one rescale of O^T / l_t / z_t for both pages."""
    s_a, cm_a = _page_logits(qt_lo, qt_hi, ku, kl, ks_lo, ks_hi, kz_lo, kz_hi, j, n_scored, j1, vis_a, score_lim,
                             raw_ptr, raw_ok, HAS_SCORES, USE_ASM, SCORE_LSE)
    s_b, cm_b = _page_logits(qt_lo, qt_hi, ku2, kl2, ks_lo2, ks_hi2, kz_lo2, kz_hi2, j + 1, n_scored, j1, vis_b,
                             score_lim, raw_ptr + 2 * G, raw_ok, HAS_SCORES, USE_ASM, SCORE_LSE)
    m_new = tl.maximum(m_r, tl.maximum(cm_a, cm_b))
    alpha = tl.exp2((m_r - m_new) * qk_scale)
    mq = (m_new * qk_scale)[None, :]
    p_a = tl.exp2(s_a * qk_scale - mq)
    p_b = tl.exp2(s_b * qk_scale - mq)
    if HAS_SCORES and SCORE_LSE:
        _page_lse(p_a, m_new, qk_scale, j, j1, score_lim, raw_ptr, raw_ok)
        _page_lse(p_b, m_new, qk_scale, j + 1, j1, score_lim, raw_ptr + 2 * G, raw_ok)
    vsf = vs.to(tl.float32)
    vsf2 = vs2.to(tl.float32)
    l_t = l_t * alpha[None, :] + (p_a + p_b)
    z_t = (z_t * alpha[None, :] + p_a * (vz.to(tl.float32) + 7.53125 * vsf)[:, None]
           + p_b * (vz2.to(tl.float32) + 7.53125 * vsf2)[:, None])
    ps_a = (p_a * vsf[:, None]).to(tl.float16)
    ps_b = (p_b * vsf2[:, None]).to(tl.float16)
    v_lo, v_hi = values_i8(vu, vl, USE_ASM)
    v_lo2, v_hi2 = values_i8(vu2, vl2, USE_ASM)
    at_lo = tl.dot(tl.trans(v_lo), ps_a, at_lo * alpha[None, :])
    at_lo = tl.dot(tl.trans(v_lo2), ps_b, at_lo)
    at_hi = tl.dot(tl.trans(v_hi), ps_a, at_hi * alpha[None, :])
    at_hi = tl.dot(tl.trans(v_hi2), ps_b, at_hi)
    return m_new, l_t, z_t, at_lo, at_hi


@triton.jit
def _prep_w64(s, z, USE_ASM: tl.constexpr):
    """int64 scale / zero words (4 fp16 channels) -> prepared (s/16, z') int32 pairs: s01, s23, z01, z23."""
    s01, z01 = prep_key_scales(s.to(tl.int32), z.to(tl.int32), USE_ASM)
    s23, z23 = prep_key_scales((s >> 32).to(tl.int32), (z >> 32).to(tl.int32), USE_ASM)
    return s01, s23, z01, z23


@triton.jit
def _rows_page(m_i, l_i, acc_lo, acc_hi, q_lo, q_hi, qk_scale, ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz, j,
               n_scored, j1, score_lim, vis, raw_ptr, raw_ok, HAS_SCORES: tl.constexpr, MERGED: tl.constexpr,
               USE_ASM: tl.constexpr, SCORE_LSE: tl.constexpr):
    """Online-softmax update of every row with one INT8 page, rows as the MMA M dimension: ``S = Q K^T``
    [BLOCK_M, P] (raw q·k; m_i in the same units), ``acc += p V`` with fp16 p and fp16 dequantized values. Key
    scales as ``_load_page(..., W64=True)`` loads them. MERGED: the two halves of D as one interleaved tile
    (column 2c + half = channel half * DH + c; q_lo is Q in that order, acc_lo the whole accumulator, q_hi /
    acc_hi unused): one shared-memory tile, fence and dot per operand instead of two. SCORE_LSE: each score row's
    page log-sum-exp (``_page_lse``'s value) from the row sum of p, in place of the row max."""
    sl01, sl23, zl01, zl23 = _prep_w64(ks_lo, kz_lo, USE_ASM)
    sh01, sh23, zh01, zh23 = _prep_w64(ks_hi, kz_hi, USE_ASM)
    k_lo, k_hi = keys_i8_v(ku, kl, sl01, sl23, zl01, zl23, sh01, sh23, zh01, zh23, USE_ASM)
    if MERGED:
        s = tl.dot(q_lo, tl.trans(_interleave(k_lo, k_hi)))
    else:
        s = tl.dot(q_lo, tl.trans(k_lo))
        s = tl.dot(q_hi, tl.trans(k_hi), s)  # [BLOCK_M, P]
    if (j >= n_scored) | (j >= j1):
        s = tl.where((vis & (j < j1))[:, None], s, float("-inf"))
    cm = tl.max(s, 1)  # per row, intra-warp
    if HAS_SCORES and not SCORE_LSE:
        tl.store(raw_ptr, cm, mask=raw_ok & (j < score_lim) & (j < j1))
    m_new = tl.maximum(m_i, cm)
    alpha = tl.exp2((m_i - m_new) * qk_scale)
    p = tl.exp2(s * qk_scale - (m_new * qk_scale)[:, None])
    ps = tl.sum(p, 1)  # per row, intra-warp
    l_i = l_i * alpha + ps
    if HAS_SCORES and SCORE_LSE:  # _page_lse's value from the row sum the update needs anyway
        tl.store(raw_ptr, m_new + tl.log2(ps) / qk_scale, mask=raw_ok & (j < score_lim) & (j < j1))
    v_lo, v_hi = values_deq(vu, vl, vs, vz, USE_ASM)
    pf = p.to(tl.float16)
    if MERGED:
        acc_lo = tl.dot(pf, _interleave(v_lo, v_hi), acc_lo * alpha[:, None])
    else:
        acc_lo = tl.dot(pf, v_lo, acc_lo * alpha[:, None])
        acc_hi = tl.dot(pf, v_hi, acc_hi * alpha[:, None])
    return m_new, l_i, acc_lo, acc_hi


@triton.jit
def _interleave(a, b):
    """[R, C] x 2 -> [R, 2C], column 2c + t = (a, b)[t][:, c]."""
    R: tl.constexpr = a.shape[0]
    C: tl.constexpr = a.shape[1]
    return tl.reshape(tl.join(a, b), (R, 2 * C))
