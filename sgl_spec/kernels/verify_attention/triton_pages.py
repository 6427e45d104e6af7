"""INT8 page steps of ``verify_attention``'s Triton stage 1 (``triton_stage1.py``): loading one page's words and
scales, and the online-softmax update of one page with the page's tokens as the MMA M dimension: ``S^T = K Q^T``
with the keys dequantized in registers, ``O^T += (C_v - 128)^T (p∘s_v)`` with exact centred value codes, and per
(token, row) running row sums and value zero terms (reduced once after the loop).
"""
from __future__ import annotations

import triton
import triton.language as tl

from sgl_spec.kernels.common.int8_words import keys_i8, prep_key_scales, values_i8
from sgl_spec.kernels.common.nibble_words import _key_frag, _tok_perm


@triton.jit
def _load_page(KU, KL, VU, VL, KS, KZ, VS, VZ, pg, ok, h, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, n, offs_w, w_ok,
               W: tl.constexpr):
    """One page's INT8 tiles for KV head h: the four planes as int32 words [P, BLOCK_W], the key scales/zeros as
    int32 fp16-pair tiles [BLOCK_W, 2] per half of D, the value scales/zeros fp16 [P]. ``ok`` False loads zeros."""
    pg = pg.to(tl.int64)
    tile = pg * s_wp + h * s_wh + n[:, None].to(tl.int64) * W + offs_w[None, :]
    m2 = ok & w_ok[None, :]
    ku = tl.load(KU + tile, mask=m2, other=0, cache_modifier=".cg")
    kl = tl.load(KL + tile, mask=m2, other=0, cache_modifier=".cg")
    vu = tl.load(VU + tile, mask=m2, other=0, cache_modifier=".cg")
    vl = tl.load(VL + tile, mask=m2, other=0, cache_modifier=".cg")
    # word 2w + t of k_scale / k_zero holds channels 4w + 2t, 4w + 2t + 1
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
    if (jj >= n_scored) | (jj >= j1):  # rows' own pages start at q_start // P
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
