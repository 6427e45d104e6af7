"""``draft_decode``'s hot-token program (split 0 of each (request, KV head)): attention over the request's newest
tokens, which sit in the full-precision ring (<= 2 pages in the model dtype), and, with WRITE_NEW, the query token's
own K/V written into the ring first. The page splits are in triton_pages.py."""
from __future__ import annotations

import triton
import triton.language as tl

RING = 2
_RING_C = tl.constexpr(RING)  # jit functions only see constexpr globals


@triton.jit
def _attend_hot(b, h, q_row, offs_c, c_ok, g_ok, m_i, l_i, acc_lo, acc_hi,
                hk_ptr, hv_ptr, s_hs, s_hr, s_hn, s_hh, hslot_ptr, hstart_ptr, hlen_ptr,
                nk_ptr, nv_ptr, s_nb, s_nh, qk_scale,
                HALF: tl.constexpr, P: tl.constexpr, HOT_PREC: tl.constexpr, HOT_BLOCK: tl.constexpr,
                HOT_NATIVE: tl.constexpr, WRITE_NEW: tl.constexpr):
    """Online softmax over positions hot_start .. hot_start + hot_len - 1 of ring slot hot_slot, HOT_BLOCK tokens a
    step; returns (m, l, acc_lo, acc_hi) with acc unnormalized, rows = the G query heads (padded), log2 units.

    Operands: HOT_NATIVE (16-bit models on the GPU) dots q and K as stored (products exact, fp32 accumulation) and
    rounds p to the model dtype for P·V (a draft only proposes tokens; the verify decides). Otherwise fp32 operands:
    bf16/fp16 values are exact in tf32, so HOT_PREC="tf32" loses nothing for 16-bit models (fp32 models use "ieee";
    the interpreter cannot dot bf16 at all)."""
    slot = tl.load(hslot_ptr + b).to(tl.int64)
    start = tl.load(hstart_ptr + b)
    hlen = tl.load(hlen_ptr + b)
    q_ok = g_ok[:, None] & c_ok[None, :]
    qh_lo = tl.load(q_row[:, None] + offs_c[None, :], mask=q_ok, other=0.0)
    qh_hi = tl.load(q_row[:, None] + offs_c[None, :] + HALF, mask=q_ok, other=0.0)
    if HOT_NATIVE:
        qh_lo = qh_lo.to(hk_ptr.dtype.element_ty)
        qh_hi = qh_hi.to(hk_ptr.dtype.element_ty)
    else:
        qh_lo = qh_lo.to(tl.float32)
        qh_hi = qh_hi.to(tl.float32)
    if WRITE_NEW:
        # The query's own K/V (position start + hlen - 1) go into the ring here instead of in a ring_write launch of
        # their own (a draft pass is launch-bound on small models). Only this program reads the ring in this launch;
        # the barrier makes its threads' stores visible to its own loads below (CUDA: __syncthreads orders global
        # memory within a block).
        pn = start + hlen - 1
        dst = slot * s_hs + ((pn // P) % _RING_C).to(tl.int64) * s_hr + (pn % P).to(tl.int64) * s_hn + h * s_hh
        src = b.to(tl.int64) * s_nb + h.to(tl.int64) * s_nh + offs_c
        ty = hk_ptr.dtype.element_ty
        tl.store(hk_ptr + dst + offs_c, tl.load(nk_ptr + src, mask=c_ok).to(ty), mask=c_ok)
        tl.store(hk_ptr + dst + offs_c + HALF, tl.load(nk_ptr + src + HALF, mask=c_ok).to(ty), mask=c_ok)
        tl.store(hv_ptr + dst + offs_c, tl.load(nv_ptr + src, mask=c_ok).to(ty), mask=c_ok)
        tl.store(hv_ptr + dst + offs_c + HALF, tl.load(nv_ptr + src + HALF, mask=c_ok).to(ty), mask=c_ok)
        tl.debug_barrier()
    offs_t = tl.arange(0, HOT_BLOCK)
    for t0 in range(0, hlen, HOT_BLOCK):
        t = t0 + offs_t
        t_ok = t < hlen
        pos = start + t
        tok = slot * s_hs + ((pos // P) % _RING_C).to(tl.int64) * s_hr + (pos % P).to(tl.int64) * s_hn + h * s_hh
        at = tok[:, None] + offs_c[None, :]
        ok2 = t_ok[:, None] & c_ok[None, :]
        k_lo = tl.load(hk_ptr + at, mask=ok2, other=0.0)
        k_hi = tl.load(hk_ptr + at + HALF, mask=ok2, other=0.0)
        if HOT_NATIVE:
            sc = tl.dot(qh_lo, tl.trans(k_lo))
            sc = tl.dot(qh_hi, tl.trans(k_hi), sc)
        else:
            sc = tl.dot(qh_lo, tl.trans(k_lo.to(tl.float32)), input_precision=HOT_PREC)
            sc = tl.dot(qh_hi, tl.trans(k_hi.to(tl.float32)), sc, input_precision=HOT_PREC)
        sc = tl.where(t_ok[None, :], sc * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(sc, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(sc - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v_lo = tl.load(hv_ptr + at, mask=ok2, other=0.0)
        v_hi = tl.load(hv_ptr + at + HALF, mask=ok2, other=0.0)
        if HOT_NATIVE:
            pv = p.to(hv_ptr.dtype.element_ty)
            acc_lo = tl.dot(pv, v_lo, acc_lo * alpha[:, None])
            acc_hi = tl.dot(pv, v_hi, acc_hi * alpha[:, None])
        else:
            acc_lo = tl.dot(p, v_lo.to(tl.float32), acc_lo * alpha[:, None], input_precision=HOT_PREC)
            acc_hi = tl.dot(p, v_hi.to(tl.float32), acc_hi * alpha[:, None], input_precision=HOT_PREC)
        m_i = m_new
    return m_i, l_i, acc_lo, acc_hi
