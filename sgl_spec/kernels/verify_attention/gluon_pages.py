"""Gluon page programs for ``verify_attention`` (``engine="gluon"``; P = 64 or 128, head_dim 128, NQ * G <= 32 rows,
sm_90+, Triton 3.6; the launch rules: ``gluon_rules.py``). A 128-token page runs as two 64-token sub-pages (``SUB``
= 2, ``_sub_page``) that share its key scales: the same tile, splits and groups at whole pages, the page scores
reduced over both sub-pages.

A program is **four warps and one split of one (request, KV head)**; pages go in groups of four (``gluon_frags.py``
holds the operand conversions, ``gluon_rows.py`` the column-side work; why this shape: docs/KERNELS.md):

* **scores, one page a warp.** Warp w converts the keys of page w of the group (both planes, byte-wise INT8 asm with
  the page's s/16 and z' = z + 7.53125 s) straight into the ``mma.sync.m16n8k16`` A fragment, 32 channels at a time
  (the channel order of the MMA's reduction is free: q^T, an fp16 B operand in shared memory, is stored in the same
  order, ``_key_channel``), and computes ``S^T [64 tokens, N] = K q^T`` (N = NQ * G padded to a power of two, or
  17..24 rows as two tiles of 16 + 8 columns on the same converted keys and values, ``row_tiles``);
* **one softmax step a group.** The group's maximum per row (raw q·k; the four page maxima through shared memory,
  one barrier) rescales the running sums once per four pages; each warp writes its page's ``p' = p s_v`` (fp16, the
  value scale folded in, as the Triton kernel does) to shared memory and keeps running row sums ``l`` and
  value-zero terms ``Σ p (z_v + 7.53125 s_v)``, each lane over its own rows (reduced over lanes and warps once
  after the loop, ``_probs``);
* **values, one channel slab a warp.** Warp w reads, for each page of the group, the 16-bit halves of the value
  words holding its 32 channels (two tokens' halves make the V^T A fragment's token pairs, exact centred codes
  c - 128) and accumulates ``O^T [32 channels, N] += V^T p'^T``: N fp32 registers a lane instead of 4 N.

Pages move by ``cp.async`` into single shared-memory buffers (keys + scales 36 KB, values 32 KB, ~92 KB a program,
two programs an SM), a phase ahead: a group's keys while the previous group's values are read, its values while its
scores are computed (four barriers a group).

The partials (m, l, unnormalized acc) are those of the Triton kernel, at partial index 1 + split of the same page
partition, so the ring split (``gluon_ring.py``, or the Triton stage 1's split 0) and the Triton merge (``merge.py``)
are reused unchanged. The page launch runs first: it waits for the stream and releases the ring launch at its start.
The page scores of kind "max" are stored by the page programs themselves (``direct_scores``), from the page maxima
in ``mx`` after the values; kind "lse" stores RAW page log-sum-exps that the merge's score programs reduce. Where
``slim_form`` says so the window's row tensors are recomputed where used, so fewer values stay live through the
loop.

The page loop (``_page_loop``) is also the compute partition of the copy-warp form (``gluon_copy_warp.py``, ``WS``):
there a warp of its own fills the same buffers by TMA and the loop waits on mbarriers instead of cp.async groups.
"""
from __future__ import annotations

import torch

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy, mma_v2
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

from sgl_spec.kernels.common.gluon_compat import cta_barrier
from sgl_spec.kernels.verify_attention.gluon_frags import (COLS, MMA, OPA, OPB, ROWS, VH, VSL, _per_warp, _rows,
                                               _scores, _values_a)
from sgl_spec.kernels.verify_attention.gluon_rules import (GLUON_PAGE_SIZE, NUM_WARPS, copy_warp_form, row_tiles, slim_form,
                                                           value_branches)
from sgl_spec.kernels.verify_attention.gluon_frags import _per_lane
from sgl_spec.kernels.verify_attention.gluon_rows import (_group_max, _mask, _page_max, _probs, _q_tile, _row_pages,
                                                          _store_partial, _store_raw, _store_scores_mx)

# ---- copy and shared-memory layouts (4 warps) ---------------------------------------------------------------------
CPK = gl.constexpr(gl.BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[8, 4], warps_per_cta=[4, 1],
                                     order=[1, 0]))
CPS = gl.constexpr(gl.BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[2, 16], warps_per_cta=[4, 1],
                                     order=[1, 0]))
CPT = gl.constexpr(gl.BlockedLayout(size_per_thread=[1, 8], threads_per_warp=[4, 8], warps_per_cta=[4, 1],
                                     order=[1, 0]))
VSM = gl.constexpr(gl.SwizzledSharedLayout(vec=8, per_phase=2, max_phase=4, order=[1, 0]))
FLAT = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
QSM = gl.constexpr(gl.SwizzledSharedLayout(vec=8, per_phase=1, max_phase=8, order=[0, 1]))
PSM = gl.constexpr(gl.SwizzledSharedLayout(vec=8, per_phase=1, max_phase=8, order=[0, 1]))


@gluon.jit
def _verify_pages_kernel(
    q_ptr, s_qb, s_qn, s_qh,
    ku_ptr, kl_ptr, vu_ptr, vl_ptr, s_wp, s_wh,
    ks_ptr, kz_ptr, s_sp, s_sh,
    vs_ptr, vz_ptr, s_vp, s_vh,
    pt_ptr, s_pb, s_pj, qs_ptr,
    m_ptr, l_ptr, acc_ptr, raw_ptr, s_rb, s_rh, sc_ptr, s_cb, s_ch, s_cj, sm_scale,
    qk_scale, NQ, HQ, S1, C, NS, ra, rb, n_front, lo_r, hi_r,
    G: gl.constexpr, N: gl.constexpr, HAS_SCORES: gl.constexpr, SCORE_LSE: gl.constexpr, PDL: gl.constexpr = False,
    SLIM: gl.constexpr = False, N2: gl.constexpr = 0, SUB: gl.constexpr = 1, BR: gl.constexpr = False,
):
    _pdl_start(PDL)
    s, h, b, q_start, j0, j1, n_req = _split(qs_ptr, NQ, C, NS, SUB)
    if j0 < n_req:
        n_c, own_a, own_b = _row_pages(q_start, NQ, ra, rb, n_front, lo_r, hi_r, G, N, N2, SLIM, SUB)
        qsm, qsm_b, psm_b, mx_b = _q_tiles(q_ptr, s_qb, s_qn, s_qh, b, h, NQ, ra, rb, n_front, lo_r, hi_r, G, N, N2)
        ksm_u = gl.allocate_shared_memory(gl.int32, [256, 16], FLAT)  # [page * 64 + token, word]
        ksm_l = gl.allocate_shared_memory(gl.int32, [256, 16], FLAT)
        sss = gl.allocate_shared_memory(gl.int32, [4, 64], FLAT)  # key scale pairs [page, pair]
        zss = gl.allocate_shared_memory(gl.int32, [4, 64], FLAT)
        vss = gl.allocate_shared_memory(gl.float16, [4, 64], FLAT)  # value scales [page, token]
        vzs = gl.allocate_shared_memory(gl.float16, [4, 64], FLAT)
        vsm_u = gl.allocate_shared_memory(gl.int16, [256, 32], VSM)  # [page * 64 + token, half-word]
        vsm_l = gl.allocate_shared_memory(gl.int16, [256, 32], VSM)
        psm = gl.allocate_shared_memory(gl.float16, [256, N], PSM)  # [page * 64 + token, row]
        mx = gl.allocate_shared_memory(gl.float32, [4, N], FLAT)  # each page's max per row
        if N2 == 0:
            psm_b = psm
            mx_b = mx
        cta_barrier()  # q^T written by all warps, read whole by each
        _page_loop(ksm_u, ksm_l, sss, zss, vss, vzs, vsm_u, vsm_l, qsm, qsm_b, psm, psm_b, mx, mx_b,
                   ku_ptr, kl_ptr, vu_ptr, vl_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh,
                   pt_ptr + b * s_pb, s_pj, 0, 0, 0, 0, q_start, j0, j1, s, h, b, n_c, own_a, own_b, m_ptr, l_ptr,
                   acc_ptr, raw_ptr, s_rb, s_rh, sc_ptr, s_cb, s_ch, s_cj, sm_scale, qk_scale, NQ, HQ, S1, ra, rb,
                   n_front, lo_r, hi_r, G, N, HAS_SCORES, SCORE_LSE, SLIM, N2, SUB, BR, False)


@gluon.jit
def _pdl_start(PDL: gl.constexpr):
    """The page launch runs before the ring launch: wait for the stream, then let the ring launch start."""
    if PDL:
        gl.inline_asm_elementwise("griddepcontrol.wait; griddepcontrol.launch_dependents; // dummy $0", "=r", [],
                                  dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _split(qs_ptr, NQ, C, NS, SUB: gl.constexpr):
    """(split s, KV head h, request b, q_start, first and end (sub-)page j0, j1, the window's INT8 (sub-)pages) of
    this program. Page indices count 64-token sub-pages: SUB = P / 64 of them a page (a 128-token page as two
    sub-pages that share its key scales); the partition, the window's INT8 pages and the scored pages are whole
    pages. The program has work where j0 < n_req."""
    s = gl.program_id(0)
    h = gl.program_id(1)
    b = gl.program_id(2).to(gl.int64)
    q_start = gl.load(qs_ptr + b)
    PT: gl.constexpr = 64 * SUB  # tokens a page
    n_req = (q_start + NQ - 1) // PT * SUB  # INT8 (sub-)pages the window needs
    Cb = gl.maximum(C, (q_start // PT + NS) // NS) * SUB  # splits._split_pages, in sub-pages
    j0 = s * Cb
    return s, h, b, q_start, j0, gl.minimum(j0 + Cb, n_req), n_req


@gluon.jit
def _q_tiles(q_ptr, s_qb, s_qn, s_qh, b, h, NQ, ra, rb, n_front, lo_r, hi_r, G: gl.constexpr, N: gl.constexpr,
             N2: gl.constexpr):
    """q^T [128, N] (+ [128, N2]) fp16 (raw: the logits are scaled in fp32), channels in the keys' order, in shared
    memory, and tile B's p' and page maxima buffers -> (qsm, qsm_b, psm_b, mx_b); with one tile (N2 = 0) the last
    three are qsm, never read (the caller sets psm_b, mx_b to its own psm, mx)."""
    qsm = gl.allocate_shared_memory(gl.float16, [128, N], QSM, _q_tile(q_ptr, s_qb, s_qn, s_qh, b, h, 0, N, NQ, ra, rb,
                                                                     n_front, lo_r, hi_r, G))
    if N2 > 0:
        qsm_b = gl.allocate_shared_memory(gl.float16, [128, N2], QSM, _q_tile(q_ptr, s_qb, s_qn, s_qh, b, h, N, N2, NQ,
                                                                              ra, rb, n_front, lo_r, hi_r, G))
        psm_b = gl.allocate_shared_memory(gl.float16, [256, N2], PSM)
        mx_b = gl.allocate_shared_memory(gl.float32, [4, N2], FLAT)
    else:
        qsm_b = qsm
        psm_b = qsm
        mx_b = qsm
    return qsm, qsm_b, psm_b, mx_b


@gluon.jit
def _page_loop(ksm_u, ksm_l, sss, zss, vss, vzs, vsm_u, vsm_l, qsm, qsm_b, psm, psm_b, mx, mx_b,
               ku_ptr, kl_ptr, vu_ptr, vl_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh,
               pt_row, s_pj, kfull, kempty, vfull, vempty, q_start, j0, j1, s, h, b, n_c, own_a, own_b, m_ptr, l_ptr,
               acc_ptr, raw_ptr, s_rb, s_rh, sc_ptr, s_cb, s_ch, s_cj, sm_scale, qk_scale, NQ, HQ, S1, ra, rb, n_front,
               lo_r, hi_r,
               G: gl.constexpr, N: gl.constexpr, HAS_SCORES: gl.constexpr, SCORE_LSE: gl.constexpr,
               SLIM: gl.constexpr, N2: gl.constexpr, SUB: gl.constexpr, BR: gl.constexpr, WS: gl.constexpr):
    """A program's pages j0 .. j1 - 1 of (request b, KV head h) in groups of four, then its partials at index 1 + s
    (n_c, own_a, own_b: the rows' columns and own pages, computed by the caller before its q^T tiles).
    The buffers' bytes come by cp.async from these four warps (WS False: the copy helpers below, the pointer
    arguments used), or (WS True: the compute partition of sgl_spec/kernels/verify_attention/gluon_copy_warp.py, the pointer arguments
    unused) from the copy warp's TMA copies, waited for on kfull / vfull and handed back on kempty / vempty."""
    n_scored = q_start // (64 * SUB) * SUB
    # ---- index tensors -------------------------------------------------------------------------------------------
    if not WS:
        kR = gl.arange(0, 256, layout=gl.SliceLayout(1, CPK))
        k_off = (kR % 64)[:, None] * 16 + gl.arange(0, 16, layout=gl.SliceLayout(0, CPK))[None, :]
        vR = gl.arange(0, 256, layout=gl.SliceLayout(1, CPT))
        v_off = (vR % 64)[:, None] * 32 + gl.arange(0, 32, layout=gl.SliceLayout(0, CPT))[None, :]
        sW = gl.arange(0, 4, layout=gl.SliceLayout(1, CPS))
        s_off = gl.arange(0, 64, layout=gl.SliceLayout(0, CPS))
    rR = gl.arange(0, 256, layout=ROWS)
    r_w = (rR >> 4) & 3

    m_run = gl.full([N], -1.0e30, gl.float32, layout=COLS)
    acc = gl.zeros([128, N], gl.float32, layout=MMA)
    zero_s = gl.zeros([256, N], gl.float32, layout=MMA)
    l_w = _per_lane(zero_s)  # running sums per lane [4 w, 8 g, N] (warp w: the group's page w)
    z_w = _per_lane(zero_s)
    if N2 > 0:  # tile B's state (N2 = 0: nothing of it exists, so nothing more is carried through the loop)
        m_run_b = gl.full([N2], -1.0e30, gl.float32, layout=COLS)
        acc_b = gl.zeros([128, N2], gl.float32, layout=MMA)
        zero_b = gl.zeros([256, N2], gl.float32, layout=MMA)
        l_wb = _per_lane(zero_b)
        z_wb = _per_lane(zero_b)
    else:
        zero_b = zero_s

    # keys (+ scales) in shared memory by cp.async a phase ahead: a group's keys during the previous group's
    # values, its values during its own scores (single buffers: 96 KB, two programs an SM). WS: the copy warp's
    # TMA copies instead
    # (sgl_spec/kernels/verify_attention/gluon_copy_warp.py), which take the key buffers back at the page-maxima barrier
    if not WS:
        _copy_keys(ksm_u, ksm_l, sss, zss, vss, vzs, ku_ptr, kl_ptr, ks_ptr,
                   kz_ptr, vs_ptr, vz_ptr, pt_row, s_pj, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, h, j0, j1, kR, k_off,
                   sW, s_off, SUB)
        _copy_values(vsm_u, vsm_l, vu_ptr, vl_ptr, pt_row, s_pj, s_wp, s_wh, h, j0, j1, vR,
                     v_off, SUB)
    for jb in range(j0, j1, 4):
        if WS:
            ph = ((jb - j0) // 4) & 1
            mbarrier.wait(kfull, ph)  # this group's keys and scales
        else:
            async_copy.wait_group(1)  # this group's keys (its values may be in flight)
            cta_barrier()
        sc, sc_b = _scores(ksm_u, ksm_l, sss, zss, qsm, qsm_b, zero_s, zero_b, N2)
        vs = _rows(vss.reshape([4, 4, 16]).load(VSL))
        vz = _rows(vzs.reshape([4, 4, 16]).load(VSL))
        # masks: a page past the split, or one some rows must not see
        r_j = jb + r_w
        if (jb + 3 >= n_scored) | (jb + 3 >= j1):
            sc = _mask(sc, r_j, j1, n_scored, own_a, n_c, q_start, NQ, ra, rb, n_front, lo_r, hi_r, G, SLIM, SUB)
            if N2 > 0:
                sc_b = _mask(sc_b, r_j, j1, n_scored, own_b, N + gl.arange(0, N2, layout=COLS), q_start, NQ, ra,
                             rb, n_front, lo_r, hi_r, G, SLIM, SUB)
        cm4 = _page_max(sc)  # [4 w, N]
        mx.store(cm4)
        if N2 > 0:
            mx_b.store(_page_max(sc_b))
        cta_barrier()  # also: every warp is past the previous group's values (its buffers are free)
        if WS:
            mbarrier.arrive(kempty)  # keys and scales read (vs, vz in registers)
        m_new, alpha, p = _group_max(sc, m_run, mx, qk_scale)
        if HAS_SCORES and SCORE_LSE:  # the page's log-sum-exp per score row in raw q·k units
            ps4 = _per_warp(p)  # each sub-page's Σ p, against the group's one running max
            if SUB > 1:  # a page's sub-pages: the sums add (the same max)
                ps4 = gl.sum(gl.reshape(ps4, [4 // SUB, SUB, N]), 1)
            lse = gl.convert_layout(m_new, gl.SliceLayout(0, ps4.type.layout))[None, :] + gl.log2(ps4) / qk_scale
            _store_raw(raw_ptr, s_rb, s_rh, b, h, jb // SUB, lse, gl.minimum(n_scored, j1) // SUB, n_front, G, N)
        l_w, z_w = _probs(p, alpha, vs, vz, psm, l_w, z_w)
        m_run = m_new
        if N2 > 0:
            m_run_b, alpha_b, p_b = _group_max(sc_b, m_run_b, mx_b, qk_scale)
            l_wb, z_wb = _probs(p_b, alpha_b, vs, vz, psm_b, l_wb, z_wb)
        if WS:
            mbarrier.wait(vfull, ph)  # this group's values
            cta_barrier()  # p' visible
        else:
            async_copy.wait_group(0)  # this group's values
            cta_barrier()  # p' and the values visible; the key buffers free
            _copy_keys(ksm_u, ksm_l, sss, zss, vss, vzs, ku_ptr, kl_ptr,
                       ks_ptr, kz_ptr, vs_ptr, vz_ptr, pt_row, s_pj, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, h, jb + 4,
                       j1, kR, k_off, sW, s_off, SUB)
        if N2 > 0:
            acc, acc_b = _values(acc, alpha, acc_b, alpha_b, vsm_u, vsm_l, psm, psm_b, N2, jb, j1, BR)
        else:
            acc, _unused = _values(acc, alpha, acc, alpha, vsm_u, vsm_l, psm, psm, N2, jb, j1, BR)
        if HAS_SCORES and not SCORE_LSE:  # the page scores from the page maxima, in mx until the next group's barrier
            _store_scores_mx(sc_ptr, s_cb, s_ch, s_cj, jb, mx, n_scored, j1, n_front, sm_scale, G, N, SUB)
        cta_barrier()  # p' and the value buffers free
        if WS:
            mbarrier.arrive(vempty)
        else:
            _copy_values(vsm_u, vsm_l, vu_ptr, vl_ptr, pt_row, s_pj, s_wp, s_wh, h, jb + 4,
                         j1, vR, v_off, SUB)
    if not WS:
        async_copy.wait_group(0)

    # ---- partials (m, l, unnormalized acc) at index 1 + s, physical channel order --------------------------------
    _store_partial(acc, m_run, l_w, z_w, n_c, m_ptr, l_ptr, acc_ptr, b, h, s, qk_scale, NQ, HQ, S1, ra, rb, n_front,
                   lo_r, hi_r, G)
    if N2 > 0:
        _store_partial(acc_b, m_run_b, l_wb, z_wb, N + gl.arange(0, N2, layout=COLS), m_ptr, l_ptr, acc_ptr, b, h,
                       s, qk_scale, NQ, HQ, S1, ra, rb, n_front, lo_r, hi_r, G)


@gluon.jit
def _values(acc, alpha, acc_b, alpha_b, vub, vlb, psm, psm_b, N2: gl.constexpr, jb, j1, BR: gl.constexpr):
    """O^T [128, N] = alpha O^T + V^T p'^T over the group's four pages (and tile B's [128, N2]); warp w owns 32
    channels; each page's V^T fragment is converted once for both tiles. BR: each page behind a branch of its own,
    pages past the split (p' = 0) skipped (``value_branches`` says in which forms)."""
    acc = acc * alpha[None, :]
    if N2 > 0:
        acc_b = acc_b * alpha_b[None, :]
    for u in gl.static_range(4):
        if BR:
            if jb + u < j1:
                acc, acc_b = _value_page(acc, acc_b, vub, vlb, psm, psm_b, u, N2)
        else:
            acc, acc_b = _value_page(acc, acc_b, vub, vlb, psm, psm_b, u, N2)
    return acc, acc_b


@gluon.jit
def _value_page(acc, acc_b, vub, vlb, psm, psm_b, u: gl.constexpr, N2: gl.constexpr):
    va = _values_a(vub.slice(64 * u, 64).load(VH), vlb.slice(64 * u, 64).load(VH), OPA)
    acc = mma_v2(va, psm.slice(64 * u, 64).load(OPB), acc)
    if N2 > 0:
        acc_b = mma_v2(va, psm_b.slice(64 * u, 64).load(OPB), acc_b)
    return acc, acc_b


@gluon.jit
def _sub_page(pt_row, s_pj, j, ok, SUB: gl.constexpr):
    """The page id (int64) and the first token within it of (sub-)page index j: page table entry j // SUB, tokens
    64 (j % SUB) .. + 63 (the planes and value scales are token-major, sgl_spec/kvcache/format.py)."""
    if SUB == 1:
        return gl.load(pt_row + j.to(gl.int64) * s_pj, mask=ok, other=0).to(gl.int64), 0
    else:
        return gl.load(pt_row + (j // SUB).to(gl.int64) * s_pj, mask=ok, other=0).to(gl.int64), (j % SUB) * 64


@gluon.jit
def _copy_values(dst_u, dst_l, vu_ptr, vl_ptr, pt_row, s_pj, s_wp, s_wh, h, jb, j1, vR, v_off, SUB: gl.constexpr):
    """cp.async of the value planes of pages jb .. jb + 3 (< j1; the others not copied) into [256, 32] half-words."""
    ok = (jb + vR // 64) < j1
    pg, t0 = _sub_page(pt_row, s_pj, jb + vR // 64, ok, SUB)
    at = ((pg * s_wp + h * s_wh) * 2 + t0 * 32)[:, None] + v_off
    async_copy.async_copy_global_to_shared(dst_u, vu_ptr + at, mask=ok[:, None])
    async_copy.async_copy_global_to_shared(dst_l, vl_ptr + at, mask=ok[:, None])
    async_copy.commit_group()


@gluon.jit
def _copy_keys(ksm_u, ksm_l, sss, zss, vss, vzs, ku_ptr, kl_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr, pt_row, s_pj, s_wp,
               s_wh, s_sp, s_sh, s_vp, s_vh, h, jb, j1, kR, k_off, sW, s_off, SUB: gl.constexpr):
    """cp.async of pages jb .. jb + 3's key planes [256, 16] words, key scale/zero pairs [4, 64] and value
    scales/zeros [4, 64] (pages at or past j1 not copied)."""
    ok = (jb + kR // 64) < j1
    pg, t0 = _sub_page(pt_row, s_pj, jb + kR // 64, ok, SUB)
    at = (pg * s_wp + h * s_wh + t0 * 16)[:, None] + k_off
    async_copy.async_copy_global_to_shared(ksm_u, ku_ptr + at, mask=ok[:, None])
    async_copy.async_copy_global_to_shared(ksm_l, kl_ptr + at, mask=ok[:, None])
    sok = (jb + sW) < j1
    spg, st0 = _sub_page(pt_row, s_pj, jb + sW, sok, SUB)
    sat = (spg * s_sp + h * s_sh)[:, None] + s_off[None, :]
    async_copy.async_copy_global_to_shared(sss, ks_ptr + sat, mask=sok[:, None])
    async_copy.async_copy_global_to_shared(zss, kz_ptr + sat, mask=sok[:, None])
    vat = (spg * s_vp + h * s_vh + st0)[:, None] + s_off[None, :]
    async_copy.async_copy_global_to_shared(vss, vs_ptr + vat, mask=sok[:, None])
    async_copy.async_copy_global_to_shared(vzs, vz_ptr + vat, mask=sok[:, None])
    async_copy.commit_group()


# ---- launch ----------------------------------------------------------------------------------------------------------


def launch_pages(q, words, ks32, kz32, store, page_table, q_start, pm, pl, pacc, raw, qk_scale, S1, C, NS, ra, rb,
                 has_scores, score_lse, scores=None, sm_scale=1.0):
    """The page splits 1..NS of ``verify_attention`` (its checks done, its partials allocated): grid (NS, Hkv, B),
    before the ring launch, which it lets start at once. ``scores`` given (score kind "max", ``direct_scores``): the
    page scores are stored here, else RAW for the merge. Where ``copy_warp_form`` says so, the copy-warp form
    (``gluon_copy_warp.py``) runs instead, with the same partials and scores."""
    from sgl_spec.kernels.common.pdl import pdl_kwargs

    B, NQ, Hq, _ = q.shape
    Hkv, P = store.k_upper.shape[1:3]
    G = Hq // Hkv
    assert scores is not None or not has_scores or score_lse, "score kind 'max': the page programs store the scores"
    if copy_warp_form(G):  # the same programs with a copy warp
        from sgl_spec.kernels.verify_attention import gluon_copy_warp as ws

        if ws.copy_warp_supported(words, ks32, kz32, store.v_scale, store.v_zero):
            return ws.launch_pages_ws(q, words, ks32, kz32, store, page_table, q_start, pm, pl, pacc, raw, qk_scale,
                                      S1, C, NS, ra, rb, has_scores, score_lse, scores, sm_scale)
    vu16, vl16 = words[2].view(torch.int16), words[3].view(torch.int16)  # value planes read as 16-bit halves
    n1, n2 = row_tiles(NQ * G, G)
    sc = scores if scores is not None else pm.view(-1)[:1].view(1, 1, 1)  # dummy, never written without scores
    _verify_pages_kernel[(NS, Hkv, B)](
        q, q.stride(0), q.stride(1), q.stride(2),
        words[0], words[1], vu16, vl16, words[0].stride(0), words[0].stride(1),
        ks32, kz32, ks32.stride(0), ks32.stride(1),
        store.v_scale, store.v_zero, store.v_scale.stride(0), store.v_scale.stride(1),
        page_table, page_table.stride(0), page_table.stride(1), q_start,
        pm, pl, pacc, raw, raw.stride(0), raw.stride(1),
        sc, sc.stride(0), sc.stride(1), sc.stride(2), float(sm_scale),
        qk_scale, NQ, Hq, S1, C, NS, ra, rb, 1 if ra == rb else 2, min(ra, rb), max(ra, rb),
        G=G, N=n1, N2=n2, HAS_SCORES=bool(has_scores), SCORE_LSE=bool(score_lse), SLIM=slim_form(G),
        SUB=P // GLUON_PAGE_SIZE, BR=value_branches(G, n1, n2, has_scores),
        num_warps=NUM_WARPS, **pdl_kwargs(q.device),
    )
