"""The ring split of ``verify_attention`` as a Gluon launch of its own: the window's full-precision ring pages (<= 2
pages of P tokens: split 0 of the Triton stage 1, ``triton_stage1.py``) for each (request, KV head), written as
partial index 0 exactly where the Triton ring launch writes it, so the merge is unchanged.

Where: launched right after the Gluon page launch (``gluon_pages.py``), which lets it start at once (PDL); it reads
only q, the ring and q_start, which the page launch waited for, and ends after the page launch (the merge follows
it). At batch 1 its programs take the SM slots the page launch leaves free and run beside the page programs; at
larger batches they take slots as page programs end (``triton.gluon_ring_rule``: every batch of a launch that need
not be batch-invariant).

Why its own launch: the Triton ring launch computes the ring in tf32 dots, which sat on the critical path at short
contexts; as one more program of the page launch, its code changed how ptxas scheduled the page loop (slower at
long contexts even with its work skipped at run time), so the page kernel stays the one without ring code.

A program is four warps. The window's columns are those of the page programs (score rows first,
``gluon_rows._window_row``), all NT = NQ * G of them (padded to a power of two) in one tile. Per 64-token
chunk of the ring: K and V (the ring dtype) into shared memory, ``S^T [64 tokens, NT] = K q^T`` (16-bit operands,
fp32 sums: the products are exact, as the Triton ring's tf32 ones are), a column sees tokens of its own page up to
its position, online softmax in log2 units, ``O^T [128, NT] += V^T p^T`` with p as two 16-bit terms (p = hi + lo,
so the probabilities keep ~16 bits, more than the Triton ring's tf32 p). Stale ring entries past the window are never
loaded (their rows read as 0).
"""
from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from sgl_spec.kernels.common.gluon_compat import cta_barrier
from sgl_spec.kernels.verify_attention.gluon_frags import COLS, MMA, OPA, OPB, ROWS
from sgl_spec.kernels.verify_attention.gluon_rows import _window_row

# [64 tokens, 128 channels] ring chunks: 16-byte vectors along the channels, one token row per 16 lanes
RL = gl.constexpr(gl.BlockedLayout(size_per_thread=[1, 8], threads_per_warp=[2, 16], warps_per_cta=[4, 1],
                                    order=[1, 0]))
TSM = gl.constexpr(gl.SwizzledSharedLayout(vec=8, per_phase=1, max_phase=8, order=[1, 0]))
CSM = gl.constexpr(gl.SwizzledSharedLayout(vec=8, per_phase=1, max_phase=8, order=[0, 1]))  # [K, columns] operands
QL = gl.constexpr(gl.BlockedLayout(size_per_thread=[8, 1], threads_per_warp=[16, 2], warps_per_cta=[1, 4],
                                    order=[0, 1]))


@gluon.jit
def _ring_program(q_ptr, s_qb, s_qn, s_qh, hk_ptr, hv_ptr, hs_ptr, shk_s, shk_r, shk_n, shk_h,
                  m_ptr, l_ptr, acc_ptr, b, h, q_start, qk_scale, NQ, HQ, S1, ra, rb, n_front, lo_r, hi_r,
                  G: gl.constexpr, NT: gl.constexpr, PT: gl.constexpr):
    """Partial 0 (m in log2 units, l, unnormalized acc) of the window's columns for KV head h of request b."""
    dt: gl.constexpr = q_ptr.dtype.element_ty
    CH: gl.constexpr = PT // 64  # 64-token chunks a ring page
    n_c = gl.arange(0, NT, layout=COLS)
    i_c, ok_c = _window_row(n_c // G, NQ, ra, rb, n_front, lo_r, hi_r)
    pos_c = q_start + i_c
    own_c = pos_c // PT

    # q^T [128, NT] in the ring dtype (rows past the window: 0)
    qk_i = gl.arange(0, 128, layout=gl.SliceLayout(1, QL))
    qn = gl.arange(0, NT, layout=gl.SliceLayout(0, QL))
    q_i, q_ok = _window_row(qn // G, NQ, ra, rb, n_front, lo_r, hi_r)
    q_at = q_ptr + b * s_qb + q_i.to(gl.int64)[None, :] * s_qn + (h * G + qn % G).to(gl.int64)[None, :] * s_qh
    qsm = gl.allocate_shared_memory(dt, [128, NT], CSM, gl.load(q_at + qk_i[:, None], mask=q_ok[None, :], other=0.0))
    ksm = gl.allocate_shared_memory(dt, [64, 128], TSM)
    vsm = gl.allocate_shared_memory(dt, [64, 128], TSM)
    p_hi = gl.allocate_shared_memory(dt, [64, NT], CSM)
    p_lo = gl.allocate_shared_memory(dt, [64, NT], CSM)

    hslot = gl.load(hs_ptr + b).to(gl.int64)
    tR = gl.arange(0, 64, layout=gl.SliceLayout(1, RL))
    cR = gl.arange(0, 128, layout=gl.SliceLayout(0, RL))
    t_rows = gl.arange(0, 64, layout=ROWS)
    m = gl.full([NT], -1.0e30, gl.float32, layout=COLS)  # finite: a chunk a column does not see is an exact no-op
    l = gl.zeros([NT], gl.float32, layout=COLS)
    acc = gl.zeros([128, NT], gl.float32, layout=MMA)
    max_pos = q_start + NQ - 1
    for c in range(q_start // PT * CH, max_pos // 64 + 1):  # <= 2 pages
        L = c // CH
        base = hslot * shk_s + (L % 2) * shk_r + h * shk_h  # the ring holds pages L % 2 (RING = 2)
        tmask = (c * 64 + tR) <= max_pos  # entries past the window are stale: never loaded
        at = base + ((c % CH) * 64 + tR).to(gl.int64)[:, None] * shk_n + cR[None, :]
        cta_barrier()  # every warp is past the previous chunk's operands
        ksm.store(gl.load(hk_ptr + at, mask=tmask[:, None], other=0.0))
        vsm.store(gl.load(hv_ptr + at, mask=tmask[:, None], other=0.0))
        cta_barrier()
        s = mma_v2(ksm.load(OPA), qsm.load(OPB), gl.zeros([64, NT], gl.float32, layout=MMA))
        tok = c * 64 + t_rows
        vis = (ok_c & (own_c == L))[None, :] & (tok[:, None] <= pos_c[None, :])
        s = gl.where(vis, s * qk_scale, float("-inf"))
        m_new = gl.maximum(m, gl.max(s, 0))
        alpha = gl.exp2(m - m_new)
        p = gl.exp2(s - m_new[None, :])
        l = l * alpha + gl.sum(p, 0)
        hi = p.to(dt)
        p_hi.store(hi)
        p_lo.store((p - hi.to(gl.float32)).to(dt))
        cta_barrier()
        va = vsm.permute([1, 0]).load(OPA)  # V^T [128, 64]
        acc = mma_v2(va, p_hi.load(OPB), acc * alpha[None, :])
        acc = mma_v2(va, p_lo.load(OPB), acc)
        m = m_new

    prow = ((b * NQ + i_c.to(gl.int64)) * HQ + (h * G + n_c % G).to(gl.int64)) * S1  # partial index 0
    oR = gl.arange(0, 128, layout=ROWS)
    gl.store(acc_ptr + prow[None, :] * 128 + oR[:, None], acc, mask=ok_c[None, :])
    gl.store(m_ptr + prow, m, mask=ok_c)
    gl.store(l_ptr + prow, l, mask=ok_c)


@gluon.jit
def _verify_ring_kernel(q_ptr, s_qb, s_qn, s_qh, hk_ptr, hv_ptr, hs_ptr, shk_s, shk_r, shk_n, shk_h, m_ptr, l_ptr,
                        acc_ptr, qs_ptr, qk_scale, NQ, HQ, S1, ra, rb, n_front, lo_r, hi_r, G: gl.constexpr,
                        NT: gl.constexpr, PT: gl.constexpr, PDL: gl.constexpr = False):
    """Grid (Hkv, B). No wait at the start: the page launch before this one waited for the stream and released this
    launch at its start; the wait at the end keeps the merge after the page launch."""
    b = gl.program_id(1).to(gl.int64)
    _ring_program(q_ptr, s_qb, s_qn, s_qh, hk_ptr, hv_ptr, hs_ptr, shk_s, shk_r, shk_n, shk_h, m_ptr, l_ptr, acc_ptr,
                  b, gl.program_id(0), gl.load(qs_ptr + b), qk_scale, NQ, HQ, S1, ra, rb, n_front, lo_r, hi_r, G, NT,
                  PT)
    if PDL:
        gl.inline_asm_elementwise("griddepcontrol.wait; // dummy $0", "=r", [], dtype=gl.int32, is_pure=False,
                                  pack=1)


def launch_ring(q, hot_k, hot_v, hot_slot, q_start, pm, pl, pacc, qk_scale, S1, ra, rb):
    """Partial 0 of ``verify_attention``'s Gluon engine (its checks done, its partials allocated), launched right
    after the page launch, which released it at its start: grid (Hkv, B)."""
    from sgl_spec.kernels.common.pdl import pdl_kwargs
    from sgl_spec.kernels.verify_attention.gluon_rules import NUM_WARPS, _rows_tile

    B, NQ, Hq, D = q.shape
    Hkv, P = hot_k.shape[3], hot_k.shape[2]
    assert D == 128 and P % 64 == 0 and hot_k.stride(4) == 1 and q.stride(3) == 1, (q.shape, hot_k.shape)
    assert hot_k.dtype == q.dtype in (torch.float16, torch.bfloat16) and hot_v.stride() == hot_k.stride()
    _verify_ring_kernel[(Hkv, B)](
        q, q.stride(0), q.stride(1), q.stride(2), hot_k, hot_v, hot_slot, *hot_k.stride()[:4], pm, pl, pacc, q_start,
        qk_scale, NQ, Hq, S1, ra, rb, 1 if ra == rb else 2, min(ra, rb), max(ra, rb),
        G=Hq // Hkv, NT=_rows_tile(NQ * Hq // Hkv), PT=P, num_warps=NUM_WARPS, **pdl_kwargs(q.device),
    )
