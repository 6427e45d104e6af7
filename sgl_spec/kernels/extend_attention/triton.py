"""``extend_attention``, Triton engine: the EXTEND (prefill) attention of a whole batch in one launch per layer,
reading the INT8 view straight from the nibble planes (contract in docs/CONTRACTS.md; the pure-torch twin is
``ref.py``).

A program owns one block of at most ``BLOCK_T`` new tokens of one request, inside one page, and one KV head: its
rows are (token, query head of the group) pairs, ``BLOCK_T * GP`` of them (GP = the group rounded up to a power of
two; padding rows are masked). Because a block never leaves its page, all its rows read the same keys:

1. the INT8 view of every logical page before the block's page, dequantized tile by tile in registers
   (``x = z + (s/16)(16u + l - 7.5)``: keys per channel, values per token) - no dense copy of the prefix;
2. the block's own page in full precision, causal: positions before the request's ``start`` from ``prev`` (the
   ring's copy taken before this forward's ring writes), later ones from the new tokens' K/V.

Online softmax in fp32 with ``exp2``; the dot operands in fp16 (the precision class of the DECODE / TARGET_VERIFY
kernels, which also dequantize to fp16). Every row reads the same keys in the same order whatever the chunking and
whatever else is in the batch, so the result of a row does not depend on either.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

_LOG2E = 1.4426950408889634


@triton.jit
def _online(s, m_i, l_i, acc_lo, acc_hi, v_lo, v_hi, DOT: tl.constexpr):
    """One key tile into the running (max, sum, accumulators); ``s`` [M, N] in log2 units, -inf where masked."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no visible key yet (padding) stay at zero
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, 1)
    pd = p.to(DOT)
    acc_lo = acc_lo * alpha[:, None] + tl.dot(pd, v_lo.to(DOT))
    acc_hi = acc_hi * alpha[:, None] + tl.dot(pd, v_hi.to(DOT))
    return m_new, l_i, acc_lo, acc_hi


@triton.jit
def _extend_kernel(
    Q, KN, VN, PK, PV, KU, KL, KS, KZ, VU, VL, VS, VZ, PT, BLK, START, ROW0, O,
    qk_scale,
    s_qt, s_qh, s_nt, s_nh, s_pb, s_pt, s_ph, s_ot, s_oh,
    s_pg, s_ph8, s_pp, s_kg, s_kh, s_vg, s_vh, s_tb,
    G: tl.constexpr, GP: tl.constexpr, HALF: tl.constexpr, P: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, DOT: tl.constexpr,
):
    blk = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    b = tl.load(BLK + 3 * blk)
    pos0 = tl.load(BLK + 3 * blk + 1)
    pos1 = tl.load(BLK + 3 * blk + 2)  # the block's rows are positions pos0 … pos1-1, all in page pos0 // P
    start = tl.load(START + b)
    row0 = tl.load(ROW0 + b).to(tl.int64)  # row of position `start` in Q / KN / VN / O

    M: tl.constexpr = BLOCK_T * GP
    r = tl.arange(0, M)
    t_q = pos0 + r // GP
    g = r % GP
    row_ok = (g < G) & (t_q < pos1)
    c = tl.arange(0, HALF)
    q_row = row0 + (t_q - start).to(tl.int64)
    q_off = q_row[:, None] * s_qt + (h * G + g)[:, None] * s_qh + c[None, :]
    q_lo = tl.load(Q + q_off, mask=row_ok[:, None], other=0.0).to(DOT)
    q_hi = tl.load(Q + q_off + HALF, mask=row_ok[:, None], other=0.0).to(DOT)

    m_i = tl.full([M], float("-inf"), tl.float32)
    l_i = tl.zeros([M], tl.float32)
    acc_lo = tl.zeros([M, HALF], tl.float32)
    acc_hi = tl.zeros([M, HALF], tl.float32)
    n = tl.arange(0, BLOCK_N)
    j0 = pos0 // P

    # 1. the INT8 view of pages 0 … j0-1
    for j in range(0, j0):
        page = tl.load(PT + b.to(tl.int64) * s_tb + j).to(tl.int64)
        ks = KS + page * s_kg + h * s_kh
        kz = KZ + page * s_kg + h * s_kh
        ks_lo = tl.load(ks + c).to(tl.float32) * 0.0625
        ks_hi = tl.load(ks + HALF + c).to(tl.float32) * 0.0625
        kz_lo = tl.load(kz + c).to(tl.float32)
        kz_hi = tl.load(kz + HALF + c).to(tl.float32)
        plane = page * s_pg + h * s_ph8
        for n0 in tl.static_range(0, P, BLOCK_N):
            off = plane + (n0 + n)[:, None] * s_pp + c[None, :]
            ku = tl.load(KU + off).to(tl.int32)
            kl = tl.load(KL + off).to(tl.int32)
            k_lo = kz_lo[None, :] + ks_lo[None, :] * (((ku & 15) * 16 + (kl & 15)).to(tl.float32) - 7.5)
            k_hi = kz_hi[None, :] + ks_hi[None, :] * (((ku >> 4) * 16 + (kl >> 4)).to(tl.float32) - 7.5)
            s = tl.dot(q_lo, tl.trans(k_lo.to(DOT))) + tl.dot(q_hi, tl.trans(k_hi.to(DOT)))
            s = s * qk_scale
            vu = tl.load(VU + off).to(tl.int32)
            vl = tl.load(VL + off).to(tl.int32)
            vsc = tl.load(VS + page * s_vg + h * s_vh + n0 + n).to(tl.float32) * 0.0625
            vze = tl.load(VZ + page * s_vg + h * s_vh + n0 + n).to(tl.float32)
            v_lo = vze[:, None] + vsc[:, None] * (((vu & 15) * 16 + (vl & 15)).to(tl.float32) - 7.5)
            v_hi = vze[:, None] + vsc[:, None] * (((vu >> 4) * 16 + (vl >> 4)).to(tl.float32) - 7.5)
            m_i, l_i, acc_lo, acc_hi = _online(s, m_i, l_i, acc_lo, acc_hi, v_lo, v_hi, DOT)

    # 2. the own page in full precision, causal: keys j0*P … pos1-1
    f0 = j0 * P
    for t0 in range(f0, pos1, BLOCK_N):
        t = t0 + n
        live = t < pos1
        new = live & (t >= start)
        old = live & (t < start)
        n_row = row0 + (t - start).to(tl.int64)
        n_off = n_row[:, None] * s_nt + h * s_nh + c[None, :]
        p_off = b.to(tl.int64) * s_pb + (t - f0).to(tl.int64)[:, None] * s_pt + h * s_ph + c[None, :]
        k_lo = (tl.load(KN + n_off, mask=new[:, None], other=0.0).to(tl.float32)
                + tl.load(PK + p_off, mask=old[:, None], other=0.0).to(tl.float32))
        k_hi = (tl.load(KN + n_off + HALF, mask=new[:, None], other=0.0).to(tl.float32)
                + tl.load(PK + p_off + HALF, mask=old[:, None], other=0.0).to(tl.float32))
        v_lo = (tl.load(VN + n_off, mask=new[:, None], other=0.0).to(tl.float32)
                + tl.load(PV + p_off, mask=old[:, None], other=0.0).to(tl.float32))
        v_hi = (tl.load(VN + n_off + HALF, mask=new[:, None], other=0.0).to(tl.float32)
                + tl.load(PV + p_off + HALF, mask=old[:, None], other=0.0).to(tl.float32))
        s = tl.dot(q_lo, tl.trans(k_lo.to(DOT))) + tl.dot(q_hi, tl.trans(k_hi.to(DOT)))
        s = s * qk_scale
        s = tl.where(live[None, :] & (t[None, :] <= t_q[:, None]), s, float("-inf"))
        m_i, l_i, acc_lo, acc_hi = _online(s, m_i, l_i, acc_lo, acc_hi, v_lo, v_hi, DOT)

    l_safe = tl.where(l_i > 0, l_i, 1.0)
    o_off = q_row[:, None] * s_ot + (h * G + g)[:, None] * s_oh + c[None, :]
    tl.store(O + o_off, (acc_lo / l_safe[:, None]).to(O.dtype.element_ty), mask=row_ok[:, None])
    tl.store(O + o_off + HALF, (acc_hi / l_safe[:, None]).to(O.dtype.element_ty), mask=row_ok[:, None])


def extend_attention(q, k, v, prev_k, prev_v, store, page_table, plan, sm_scale: float, out=None):
    """See docs/CONTRACTS.md ``extend_attention``. ``plan``: ``ExtendPlan`` (``plan.py``) of this batch."""
    N, Hq, D = q.shape
    pages, Hkv, P, half = store.k_upper.shape
    B = page_table.shape[0]
    if Hq % Hkv or D != 2 * half or D < 32 or D & (D - 1):
        raise ValueError(f"extend_attention: q {tuple(q.shape)} against {Hkv} KV heads of head_dim {2 * half} "
                         "(head_dim a power of two >= 32, a whole number of query heads a KV head)")
    if k.shape != (N, Hkv, D) or v.shape != k.shape:
        raise ValueError(f"extend_attention: k/v {tuple(k.shape)}/{tuple(v.shape)}, want {(N, Hkv, D)}")
    if prev_k.shape != (B, P, Hkv, D) or prev_v.shape != prev_k.shape:
        raise ValueError(f"extend_attention: prev_k/prev_v {tuple(prev_k.shape)}, want {(B, P, Hkv, D)}")
    if v.stride() != k.stride() or prev_v.stride() != prev_k.stride():
        raise ValueError("extend_attention: v / prev_v must be laid out like k / prev_k (one set of strides each)")
    for name, t in (("q", q), ("k", k), ("v", v), ("prev_k", prev_k), ("prev_v", prev_v)):
        if t.stride(-1) != 1:
            raise ValueError(f"extend_attention: {name} must be contiguous in head_dim")
    for name in ("k_upper", "k_lower", "v_upper", "v_lower"):
        t = getattr(store, name)
        if t.dtype != torch.uint8 or t.stride() != store.k_upper.stride():
            raise ValueError(f"extend_attention: store.{name} must be uint8 planes laid out like k_upper")
    if store.k_upper.stride(-1) != 1 or store.k_scale.stride(-1) != 1 or store.v_scale.stride(-1) != 1:
        raise ValueError("extend_attention: planes, scales and zeros must be contiguous in their last dim")
    if store.k_scale.stride() != store.k_zero.stride() or store.v_scale.stride() != store.v_zero.stride():
        raise ValueError("extend_attention: scales and zeros must share their layout")
    if page_table.dtype != torch.int32 or page_table.stride(-1) != 1:
        raise ValueError(f"extend_attention: page_table int32 contiguous in its last dim, got {page_table.dtype}")
    if plan.blocks.dtype != torch.int32 or plan.block_t > P or P % plan.block_t:
        raise ValueError("extend_attention: plan.blocks int32 [n, 3] of blocks dividing the page")
    if out is None:
        out = torch.empty_like(q)
    elif out.shape != q.shape or out.stride(-1) != 1:
        raise ValueError(f"extend_attention: out {tuple(out.shape)}, want {tuple(q.shape)} contiguous in head_dim")
    nblk = plan.blocks.shape[0]
    if nblk == 0:
        return out
    G = Hq // Hkv
    block_n = min(64, P)
    M = plan.block_t * triton.next_power_of_2(G)
    _extend_kernel[(nblk, Hkv)](
        q, k, v, prev_k, prev_v, store.k_upper, store.k_lower, store.k_scale, store.k_zero,
        store.v_upper, store.v_lower, store.v_scale, store.v_zero, page_table, plan.blocks, plan.starts,
        plan.row0, out, float(sm_scale) * _LOG2E,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), prev_k.stride(0), prev_k.stride(1), prev_k.stride(2),
        out.stride(0), out.stride(1),
        store.k_upper.stride(0), store.k_upper.stride(1), store.k_upper.stride(2),
        store.k_scale.stride(0), store.k_scale.stride(1), store.v_scale.stride(0), store.v_scale.stride(1),
        page_table.stride(0),
        G=G, GP=triton.next_power_of_2(G), HALF=half, P=P, BLOCK_T=plan.block_t, BLOCK_N=block_n,
        DOT=tl.float16, num_warps=4 if M <= 64 else 8,
    )
    return out
