"""Gluon verify page programs with a copy warp (the Gluon verify's form for G = 4: ``gluon_rules.copy_warp_form``).
The page loop of ``gluon_pages.py``, unchanged in its math, with the per-thread ``cp.async`` copies replaced by TMA
copies that one extra warp issues (``gl.warp_specialize``): each group's key planes, key scale/zero pairs and value
scales/zeros, then its value planes, into the same single buffers a phase ahead, handed over by mbarriers (full: the
bytes landed; empty: the four compute warps are done reading).

Why: on an H200 the verify is bound by its instruction stream at the power limit; the per-thread copies and their
address math are ~14% of the page loop's sm_90 instructions and hold registers. Here the compute warps run 232
registers without spills in the loop and the copy warp's group 24, so that two programs still fit an SM (launched
at ``WS_MAXNREG`` = 128 a thread over 8 warps). Triton 3.6 puts a CTA barrier before every TMA copy issued outside a
warp-specialized partition, so the copies need a warp of their own. Figures: docs/KERNELS.md.

Needs contiguous planes (2D descriptors over them as rows of one token's 64 bytes), scales whose pages and heads start
at whole rows of 64 scale words or 64 value scales (sgl_spec/kernels/common/tma_rows.py), and row coordinates below 2^31
(``copy_warp_supported``). Pages at or past the split's end in a partial group are copied from physical page 0
(scores masked, p' zero), so every group lands the same bytes.
"""
from __future__ import annotations

import torch

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from sgl_spec.kernels.common.gluon_compat import cta_barrier
from sgl_spec.kernels.verify_attention.gluon_rules import GLUON_PAGE_SIZE, NUM_WARPS, row_tiles, slim_form, value_branches
from sgl_spec.kernels.verify_attention.gluon_pages import FLAT, PSM, VSM, _page_loop, _pdl_start, _q_tiles, _split
from sgl_spec.kernels.verify_attention.gluon_rows import _row_pages

# TMA destinations: key planes and scales unswizzled (= FLAT, as the loads read them), value planes in the NVMMA
# 64-byte swizzle, which is VSM's pattern (16-byte chunk c of 64-byte token row r at c ^ ((r >> 1) & 3))
KTM = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2))
STM = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2))
VTM = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16, rank=2))
K_BYTES = gl.constexpr(4 * (2 * 64 * 64 + 2 * 256 + 2 * 128))  # key planes, key scale/zero pairs, value scales/zeros
V_BYTES = gl.constexpr(4 * 2 * 64 * 64)
WS_MAXNREG = 128  # launch cap: 8 warps (4 compute, the copy warp's group of 4) x 128 = half the register file, two
# programs an SM; setmaxnreg then gives the compute warps 232 and the copy warps 24
COPY_WARP_REGS = gl.constexpr(24)


def copy_warp_supported(words, ks32, kz32, v_scale, v_zero) -> bool:
    """Whether the copy-warp form can address these planes and scales: contiguous planes (2D descriptors over row
    views), scales and zeros whose pages and heads start at whole rows of 64 (contiguous, or views of one buffer
    holding all four side by side: sgl_spec/kernels/common/tma_rows.py), and fewer than 2^31 rows (int32 TMA coordinates)."""
    from sgl_spec.kernels.common.tma_rows import as_rows, rows_ok

    return (all(t.is_contiguous() for t in words) and all(rows_ok(t, 64) for t in (ks32, kz32, v_scale, v_zero))
            and words[0].numel() // 16 < 2 ** 31 and as_rows(ks32, 64).shape[0] < 2 ** 31)


@gluon.jit
def _verify_pages_ws_kernel(
    q_ptr, s_qb, s_qn, s_qh,
    pt_ptr, s_pb, s_pj, qs_ptr,
    m_ptr, l_ptr, acc_ptr, raw_ptr, s_rb, s_rh, sc_ptr, s_cb, s_ch, s_cj, sm_scale,
    qk_scale, NQ, HQ, S1, C, NS, ra, rb, n_front, lo_r, hi_r,
    kud, kld, vud, vld, ksd, kzd, vsd, vzd, rk_p, rk_h, rs_p, rs_h, rv_p, rv_h,
    G: gl.constexpr, N: gl.constexpr, HAS_SCORES: gl.constexpr, SCORE_LSE: gl.constexpr, PDL: gl.constexpr = False,
    SLIM: gl.constexpr = False, N2: gl.constexpr = 0, SUB: gl.constexpr = 1, BR: gl.constexpr = False,
):
    _pdl_start(PDL)
    s, h, b, q_start, j0, j1, n_req = _split(qs_ptr, NQ, C, NS, SUB)
    if j0 < n_req:
        n_c, own_a, own_b = _row_pages(q_start, NQ, ra, rb, n_front, lo_r, hi_r, G, N, N2, SLIM, SUB)
        qsm, qsm_b, psm_b, mx_b = _q_tiles(q_ptr, s_qb, s_qn, s_qh, b, h, NQ, ra, rb, n_front, lo_r, hi_r, G, N, N2)
        kt_u = gl.allocate_shared_memory(gl.int32, [256, 16], KTM)
        kt_l = gl.allocate_shared_memory(gl.int32, [256, 16], KTM)
        st_s = gl.allocate_shared_memory(gl.int32, [4, 64], KTM)
        st_z = gl.allocate_shared_memory(gl.int32, [4, 64], KTM)
        vst_s = gl.allocate_shared_memory(gl.float16, [4, 64], STM)
        vst_z = gl.allocate_shared_memory(gl.float16, [4, 64], STM)
        vt_u = gl.allocate_shared_memory(gl.int16, [256, 32], VTM)
        vt_l = gl.allocate_shared_memory(gl.int16, [256, 32], VTM)
        psm = gl.allocate_shared_memory(gl.float16, [256, N], PSM)
        mx = gl.allocate_shared_memory(gl.float32, [4, N], FLAT)
        if N2 == 0:
            psm_b = psm
            mx_b = mx
        kfull = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        kempty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        vfull = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        vempty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(kfull, count=1)
        mbarrier.init(kempty, count=1)
        mbarrier.init(vfull, count=1)
        mbarrier.init(vempty, count=1)
        fence_async_shared()
        cta_barrier()  # q^T written by all warps, read whole by each; the barriers initialized
        # the compute warps read the buffers in the layouts of the cp.async form (the same bytes)
        ksm_u = kt_u._reinterpret(gl.int32, [256, 16], FLAT)
        ksm_l = kt_l._reinterpret(gl.int32, [256, 16], FLAT)
        sss = st_s._reinterpret(gl.int32, [4, 64], FLAT)
        zss = st_z._reinterpret(gl.int32, [4, 64], FLAT)
        vss = vst_s._reinterpret(gl.float16, [4, 64], FLAT)
        vzs = vst_z._reinterpret(gl.float16, [4, 64], FLAT)
        vsm_u = vt_u._reinterpret(gl.int16, [256, 32], VSM)
        vsm_l = vt_l._reinterpret(gl.int16, [256, 32], VSM)
        gl.warp_specialize([
            (_page_loop, (ksm_u, ksm_l, sss, zss, vss, vzs, vsm_u, vsm_l, qsm, qsm_b, psm, psm_b, mx, mx_b,
                          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, kfull, kempty, vfull, vempty, q_start, j0,
                          j1, s, h, b, n_c, own_a, own_b, m_ptr, l_ptr, acc_ptr, raw_ptr, s_rb, s_rh, sc_ptr, s_cb,
                          s_ch, s_cj, sm_scale, qk_scale, NQ, HQ, S1, ra, rb, n_front, lo_r, hi_r, G, N, HAS_SCORES,
                          SCORE_LSE, SLIM, N2, SUB, BR, True)),
            (_produce, (kud, kld, vud, vld, ksd, kzd, vsd, vzd, kt_u, kt_l, st_s, st_z, vst_s, vst_z, vt_u, vt_l,
                        kfull, kempty, vfull, vempty, pt_ptr + b * s_pb, s_pj, rk_p, rk_h, rs_p, rs_h, rv_p, rv_h, h,
                        j0, j1, SUB)),
        ], [1], [COPY_WARP_REGS])


@gluon.jit
def _produce(kud, kld, vud, vld, ksd, kzd, vsd, vzd, kt_u, kt_l, st_s, st_z, vst_s, vst_z, vt_u, vt_l, kfull, kempty,
             vfull, vempty, pt_row, s_pj, rk_p, rk_h, rs_p, rs_h, rv_p, rv_h, h, j0, j1, SUB: gl.constexpr):
    """The copy warp: each group's keys (both planes, key scale/zero pairs, value scales/zeros) once the compute
    warps have read the previous group's (at its page maxima; the cp.async form waits for that group's values to
    land first), its value planes once they are past the previous group's value MMAs. Pages at or past j1 in a
    partial group are copied from physical page 0 (never used: scores masked, p' zero), so every group
    lands K_BYTES + V_BYTES."""
    for jb in range(j0, j1, 4):
        ph = (((jb - j0) // 4) & 1) ^ 1
        mbarrier.wait(kempty, ph)  # a fresh barrier passes parity 1 at once
        mbarrier.expect(kfull, K_BYTES)
        for u in gl.static_range(4):
            j = jb + u
            pg = gl.load(pt_row + (j // SUB).to(gl.int64) * s_pj, mask=j < j1, other=0).to(gl.int32)
            row = pg * rk_p + h * rk_h + (j % SUB) * 64
            tma.async_copy_global_to_shared(kud, [row, 0], kfull, kt_u.slice(64 * u, 64))
            tma.async_copy_global_to_shared(kld, [row, 0], kfull, kt_l.slice(64 * u, 64))
            srow = pg * rs_p + h * rs_h
            tma.async_copy_global_to_shared(ksd, [srow, 0], kfull, st_s.slice(u, 1))
            tma.async_copy_global_to_shared(kzd, [srow, 0], kfull, st_z.slice(u, 1))
            vrow = pg * rv_p + h * rv_h + j % SUB
            tma.async_copy_global_to_shared(vsd, [vrow, 0], kfull, vst_s.slice(u, 1))
            tma.async_copy_global_to_shared(vzd, [vrow, 0], kfull, vst_z.slice(u, 1))
        mbarrier.wait(vempty, ph)
        mbarrier.expect(vfull, V_BYTES)
        for u in gl.static_range(4):
            j = jb + u
            pg = gl.load(pt_row + (j // SUB).to(gl.int64) * s_pj, mask=j < j1, other=0).to(gl.int32)
            row = pg * rk_p + h * rk_h + (j % SUB) * 64
            tma.async_copy_global_to_shared(vud, [row, 0], vfull, vt_u.slice(64 * u, 64))
            tma.async_copy_global_to_shared(vld, [row, 0], vfull, vt_l.slice(64 * u, 64))


def launch_pages_ws(q, words, ks32, kz32, store, page_table, q_start, pm, pl, pacc, raw, qk_scale, S1, C, NS, ra,
                    rb, has_scores, score_lse, scores=None, sm_scale=1.0):
    """``gluon_pages.launch_pages``'s launch in the copy-warp form (same arguments, partials and scores; the
    caller checked ``copy_warp_supported``)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from sgl_spec.kernels.common.pdl import pdl_kwargs
    from sgl_spec.kernels.common.tma_rows import as_rows, row_strides

    B, NQ, Hq, _ = q.shape
    Hkv, P = store.k_upper.shape[1:3]
    G = Hq // Hkv
    vu16, vl16 = words[2].view(torch.int16), words[3].view(torch.int16)
    kd = [TensorDescriptor.from_tensor(t.view(-1, 16), [64, 16], KTM.value) for t in words[:2]]
    vd = [TensorDescriptor.from_tensor(t.view(-1, 32), [64, 32], VTM.value) for t in (vu16, vl16)]
    sd = [TensorDescriptor.from_tensor(as_rows(t, 64), [1, 64], KTM.value) for t in (ks32, kz32)]
    vsd = [TensorDescriptor.from_tensor(as_rows(t, 64), [1, 64], STM.value) for t in (store.v_scale, store.v_zero)]
    n1, n2 = row_tiles(NQ * G, G)
    sc = scores if scores is not None else pm.view(-1)[:1].view(1, 1, 1)
    _verify_pages_ws_kernel[(NS, Hkv, B)](
        q, q.stride(0), q.stride(1), q.stride(2),
        page_table, page_table.stride(0), page_table.stride(1), q_start,
        pm, pl, pacc, raw, raw.stride(0), raw.stride(1),
        sc, sc.stride(0), sc.stride(1), sc.stride(2), float(sm_scale),
        qk_scale, NQ, Hq, S1, C, NS, ra, rb, 1 if ra == rb else 2, min(ra, rb), max(ra, rb),
        kd[0], kd[1], vd[0], vd[1], sd[0], sd[1], vsd[0], vsd[1],
        *row_strides(words[0], 16), *row_strides(ks32, 64), *row_strides(store.v_scale, 64),
        G=G, N=n1, N2=n2, HAS_SCORES=bool(has_scores), SCORE_LSE=bool(score_lse), SLIM=slim_form(G),
        SUB=P // GLUON_PAGE_SIZE, BR=value_branches(G, n1, n2, has_scores),
        num_warps=NUM_WARPS, maxnreg=WS_MAXNREG, **pdl_kwargs(q.device),
    )
