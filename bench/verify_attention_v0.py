"""DEV ONLY (bench/dev_kernels.py --verify-old): the previous ``verify_attention`` (v0, Triton-pipelined page loop,
row-major MMAs), kept to time old vs new on the same GPU. Not used by sgl_spec.

Triton ``verify_attention``: INT8-view paged attention for γ+1 query rows with fused page scores.

Semantics: docs/CONTRACTS.md and the pure-torch twin ``verify_attention_ref.py``.

Stage 1, grid ``(Hkv * RB, 1 + S, B)``:
* a program owns ``BLOCK_M`` query rows of one KV head: row ``r = slot * G + g`` (``g`` = query head of the group,
  ``slot`` = window row, the two score rows first). ``BLOCK_M`` depends on ``G`` only (rows for 8 window positions,
  16…64, at least 2G), never on NQ, and NQ-dependent scalars are not specialized: a row goes through the same tiles
  and the same operations whether it is verified with γ others (NQ = γ+1) or decoded alone (NQ = 1).
  ``RB = cdiv(NQ*G, BLOCK_M)`` row blocks (1 for γ ≤ 7 and G ≤ 8) sit next to each other on grid axis 0, so they
  read a page through L2 once.
* split 0 reads the ring (full precision, ≤ 2 pages, one page per iteration); split ``s ≥ 1`` reads logical pages
  ``[(s-1)C, sC)`` through the INT8 view, one page per iteration, the next page's loads in flight. The partition
  ``C`` depends on shapes only (B, Hkv, MAXP, SM count), so the page sequence a row sees is independent of NQ and
  of q_start (pages a row must not see are exact no-ops for it: alpha = 1, p = 0).
* per page: both planes ``[P, D/2]`` bytes -> ``c - 7.5`` of each half of D as exact fp16 numbers (``c | 0x6400`` is
  the fp16 ``1024 + c``: an OR and subtracts instead of a slow int->float convert); keys: the channel scale is
  folded into q (one fp16 A operand per page) and ``q·z`` is a second small MMA (z is exact in fp16); values: the
  token scale is folded into p, the zero term added per row. The page loads stay in the loop body and Triton's
  pipeliner issues them as cp.async copies ahead of use (NUM_STAGES).
* page scores (``HAS_SCORES``): from the row block holding the score rows, per page ``j < q_start // P``: max over
  the page's tokens per row, max over the two score rows per head, summed over the G heads; one store per page by
  the program that owns it (no atomics).
Stage 2, grid ``(Hq / BLOCK_H, NQ, B)``: per row, merge the partials (m, l, acc) of the hot split and of the page
splits stage 1 wrote (their count follows from q_start and the partition; the others are never read).
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.verify_attention.ref import default_score_rows

RING = 2
LOG2E = 1.4426950408889634
# Split heuristic (GPU tuning knobs): ~PROGRAMS_PER_SM programs per SM over the B*Hkv heads, but at least
# MIN_TOKENS_PER_SPLIT tokens a program, so that writing and merging its (NQ*G x D fp32) partial stays small next to
# the K/V bytes it reads.
PROGRAMS_PER_SM = 2
MIN_TOKENS_PER_SPLIT = 256
CPU_NUM_SMS = 4  # interpreter / CPU tensors: a few splits so the merge path is exercised
MERGE_BLOCK_S = 16  # merge tile: BLOCK_H heads x 16 splits x D, ~8k fp32 (64 registers a thread at 4 warps)
MERGE_TILE = 8192
# Stage-1 GPU knobs: pipeline depth of the page loop; warps for small / big (BLOCK_M * max(D/2, P) >= 2048) tiles.
# The tiles need ~250 registers a thread (ptxas, sm_90); these picks compile without spills for most shapes.
NUM_STAGES = 2
# Hand-written register double buffering of the page loop instead of Triton's pipeliner: measured slower on an H100
# (131k B=1: 493 us vs 407 us; the bytes then reach the MMA layouts through 16-bit shared-memory stores), so off.
PREFETCH = False
MAXNREG = None
NUM_WARPS = 4
NUM_WARPS_BIG = 8


@functools.lru_cache(maxsize=None)
def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return CPU_NUM_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def pages_per_split(batch: int, num_kv_heads: int, max_pages: int, page_size: int, device) -> int:
    """Pages per split ``C`` from shapes only (never NQ): ~PROGRAMS_PER_SM programs per SM over B*Hkv heads."""
    splits = max(1, min(max_pages, triton.cdiv(PROGRAMS_PER_SM * _num_sms(torch.device(device)),
                                               max(1, batch * num_kv_heads))))
    return max(1, triton.cdiv(max_pages, splits), MIN_TOKENS_PER_SPLIT // page_size)


def block_rows(group: int) -> int:
    """Rows per program: 8 window positions of G heads, padded to a tl.dot tile, >= 2G (both score rows)."""
    return max(min(64, max(16, triton.next_power_of_2(8 * group))), triton.next_power_of_2(2 * group))


@triton.jit
def _code_lo(up, lo):
    """Packed plane bytes (as int16) -> fp16 ``c - 7.5`` of channel j (low nibbles), c = 16u + l'. ``c | 0x6400`` is
    the fp16 1024 + c, so an OR and two subtracts replace a slow int -> float conversion; every step is exact."""
    return ((((up & 0xF) << 4) | (lo & 0xF) | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1024.0) - 7.5


@triton.jit
def _code_hi(up, lo):
    """As ``_code_lo`` for channel j + D/2 (high nibbles)."""
    return (((up & 0xF0) | ((lo >> 4) & 0xF) | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1024.0) - 7.5


@triton.jit
def _online_step(s, m, l):
    """Online-softmax step on masked log2 logits s [M, N]; m starts at -1e30 so a masked tile is an exact no-op."""
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp2(m - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, alpha, p, l * alpha + tl.sum(p, 1)


@triton.jit
def _load_page(KU, KL, VU, VL, KS, KZ, VS, VZ, pg, h, spl_p, spl_h, spl_n, sks_p, sks_h, svs_p, svs_h,
               n, dh, dmask, DH: tl.constexpr, ok=True):
    """One page's bytes and scales (raw dtypes); ``ok`` False loads nothing (zeros)."""
    dmask = dmask & ok
    pbase = pg * spl_p + h * spl_h
    kt_off = pbase + n[None, :] * spl_n + dh[:, None]  # K^T tiles [BLOCK_DH, P]: dot operand B of q·k
    ku = tl.load(KU + kt_off, mask=dmask[:, None], other=0)
    kl = tl.load(KL + kt_off, mask=dmask[:, None], other=0)
    v_off = pbase + n[:, None] * spl_n + dh[None, :]  # V tiles [P, BLOCK_DH]: dot operand B of p·v
    vu = tl.load(VU + v_off, mask=dmask[None, :], other=0)
    vl = tl.load(VL + v_off, mask=dmask[None, :], other=0)
    ks_off = pg * sks_p + h * sks_h + dh
    ks_lo = tl.load(KS + ks_off, mask=dmask, other=0.0)
    ks_hi = tl.load(KS + ks_off + DH, mask=dmask, other=0.0)
    kz_lo = tl.load(KZ + ks_off, mask=dmask, other=0.0)
    kz_hi = tl.load(KZ + ks_off + DH, mask=dmask, other=0.0)
    vs_off = pg * svs_p + h * svs_h + n
    return (ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, tl.load(VS + vs_off, mask=ok, other=0.0),
            tl.load(VZ + vs_off, mask=ok, other=0.0))


@triton.jit
def _int8_page(ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz, q_lo, q_hi, qk_scale, kq_scale,
               m, l, acc_lo, acc_hi, j, own_page, row_ok, slot, g, n_front, rblk, n_scored, score_ptr,
               P: tl.constexpr, G: tl.constexpr, BLOCK_G: tl.constexpr, HAS_SCORES: tl.constexpr):
    """One INT8 page for all rows of the block; q_lo/q_hi are fp16, k = z + (s/16)(c - 7.5), v likewise.
    logits (log2 units) = (qk_scale/16)·(q*s)·(c - 7.5) + qk_scale·q·z, both as fp16 MMAs: q*s is one fp16 rounding
    (|rel err| <= 2^-11; s is left unscaled so that small scales stay out of fp16 subnormals), c - 7.5 and z are
    exact, and z enters as a B operand broadcast over the page's tokens (no per-row reduction, no second q layout).
    values: acc16 = sum_n p_n*s_n*(c_n - 7.5) + 16*p_n*z_n, i.e. 16x the output (the caller divides once)."""
    ku16 = ku.to(tl.int16)  # one half of D at a time keeps a single fp16 code tile alive
    kl16 = kl.to(tl.int16)
    sc = tl.dot(q_lo * ks_lo[None, :], _code_lo(ku16, kl16))
    sc = tl.dot(q_hi * ks_hi[None, :], _code_hi(ku16, kl16), sc)
    sz = tl.dot(q_lo, tl.broadcast_to(kz_lo[:, None], (kz_lo.shape[0], P)))
    sz = tl.dot(q_hi, tl.broadcast_to(kz_hi[:, None], (kz_hi.shape[0], P)), sz)
    s = sc * kq_scale + sz * qk_scale
    if HAS_SCORES:
        if (rblk == 0) & (j < n_scored):
            gg = tl.arange(0, BLOCK_G)
            sel = (row_ok & (slot < n_front))[:, None] & (g[:, None] == gg[None, :])
            head_max = tl.max(tl.where(sel, tl.max(s, 1)[:, None], float("-inf")), 0)  # [BLOCK_G]
            tl.store(score_ptr, tl.sum(tl.where(gg < G, head_max, 0.0), 0) * 0.6931471805599453)  # log2 -> ln
    s = tl.where((row_ok & (j < own_page))[:, None], s, float("-inf"))
    m, alpha, p, l = _online_step(s, m, l)
    pv = (p * vs.to(tl.float32)[None, :]).to(tl.float16)
    pz = tl.sum(p * (16.0 * vz.to(tl.float32))[None, :], 1)[:, None]
    vu16 = vu.to(tl.int16)
    vl16 = vl.to(tl.int16)
    acc_lo = tl.dot(pv, _code_lo(vu16, vl16), acc_lo * alpha[:, None]) + pz
    acc_hi = tl.dot(pv, _code_hi(vu16, vl16), acc_hi * alpha[:, None]) + pz
    return m, l, acc_lo, acc_hi


@triton.jit(do_not_specialize=["NQ", "RB", "ra", "rb", "n_front", "lo_r", "hi_r"])
def _verify_attention_kernel(
    Q, KU, KL, VU, VL, KS, KZ, VS, VZ, PT, QSTART, HK, HV, HSLOT, PM, PL, PACC, SCORES,
    qk_scale, NQ, HQ, S1, C, RB, ra, rb, n_front, lo_r, hi_r,
    sq_b, sq_n, sq_h, spl_p, spl_h, spl_n, sks_p, sks_h, svs_p, svs_h, spt_b, spt_j,
    shk_s, shk_r, shk_n, shk_h, ssc_b, ssc_h, ssc_j,
    G: tl.constexpr, P: tl.constexpr, DH: tl.constexpr, BLOCK_DH: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_G: tl.constexpr, HAS_SCORES: tl.constexpr, NUM_STAGES: tl.constexpr, PREFETCH: tl.constexpr,
):
    # NQ-dependent scalars are never specialized: NQ = 1 (decode) and NQ = γ+1 (verify) compile to the same code
    # (pointer/stride alignment specializations aside, which change no arithmetic).
    pid_hr = tl.program_id(0)
    split = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    h = pid_hr // RB
    rblk = pid_hr % RB
    q_start = tl.load(QSTART + b)
    n_req = (q_start + NQ - 1) // P  # INT8 pages the window needs; also the window's last logical page
    j0 = (split - 1) * C
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
        if BLOCK_DH == DH:  # a splat mask keeps the byte loads vectorized
            dmask = tl.full([BLOCK_DH], 1, tl.int1)
        else:
            dmask = dh < DH
        n = tl.arange(0, P)
        q_ptr = Q + b * sq_b + i.to(tl.int64)[:, None] * sq_n + hq.to(tl.int64)[:, None] * sq_h + dh[None, :]
        qmask = row_ok[:, None] & dmask[None, :]
        q_lo = tl.load(q_ptr, mask=qmask, other=0.0)  # model dtype
        q_hi = tl.load(q_ptr + DH, mask=qmask, other=0.0)

        m = tl.full([BLOCK_M], -1.0e30, tl.float32)
        l = tl.zeros([BLOCK_M], tl.float32)
        acc_lo = tl.zeros([BLOCK_M, BLOCK_DH], tl.float32)
        acc_hi = tl.zeros([BLOCK_M, BLOCK_DH], tl.float32)
        if split == 0:
            # ---- full-precision ring pages of the window (<= 2); a row reads only its own page, tokens <= pos ----
            # fp32 operands: fp16/bf16 -> tf32 is exact, so q·k products are exact; the ring is tiny next to the
            # pages, so the slower tf32 MMA costs nothing measurable (and the interpreter cannot dot bf16).
            hslot = tl.load(HSLOT + b).to(tl.int64)
            max_pos = q_start + NQ - 1
            for L in tl.range(q_start // P, n_req + 1, num_stages=1):  # <= 2 iterations: not worth smem stages
                tok = L * P + n
                tmask = tok <= max_pos  # ring entries past the window are stale: never loaded
                hbase = hslot * shk_s + (L % 2) * shk_r + h64 * shk_h  # R = RING = 2; ring index * stride: small
                kt_ptr = HK + hbase + n[None, :].to(tl.int64) * shk_n + dh[:, None]  # K^T tile [BLOCK_DH, P]
                kmask = dmask[:, None] & tmask[None, :]
                kt_lo = tl.load(kt_ptr, mask=kmask, other=0.0).to(tl.float32)
                kt_hi = tl.load(kt_ptr + DH, mask=kmask, other=0.0).to(tl.float32)
                s = tl.dot(q_lo.to(tl.float32), kt_lo, input_precision="tf32")
                s = tl.dot(q_hi.to(tl.float32), kt_hi, s, input_precision="tf32") * qk_scale
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
            # ---- INT8 view of logical pages [j0, j1), one page per iteration -----------------------------------
            kq_scale = qk_scale * 0.0625
            # bf16 -> fp16 is exact for |q| in [2^-14, 65504] (bf16 has fewer mantissa bits); only far-subnormal
            # components, which contribute nothing measurable, are rounded.
            q16_lo = q_lo.to(tl.float16)
            q16_hi = q_hi.to(tl.float16)
            j1 = tl.minimum(j0 + C, n_req)
            n_scored = q_start // P  # pages j < q_start // P get a score (every row sees all of them)
            pt_row = PT + b * spt_b
            if PREFETCH:
                # register double buffering by hand (num_stages=1): page j+1's loads are issued before page j is
                # computed. Triton's pipeliner, given the page-id load that addresses the tiles, waits for *all*
                # outstanding cp.async copies every iteration (DEPBAR 0), so nothing overlapped.
                ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz = _load_page(
                    KU, KL, VU, VL, KS, KZ, VS, VZ, tl.load(pt_row + j0 * spt_j, mask=j0 < j1, other=0).to(tl.int64),
                    h64, spl_p, spl_h, spl_n, sks_p, sks_h, svs_p, svs_h, n, dh, dmask, DH, j0 < j1)
                pg_next = tl.load(pt_row + (j0 + 1) * spt_j, mask=j0 + 1 < j1, other=0).to(tl.int64)
                for j in tl.range(j0, j1, num_stages=1):
                    nku, nkl, nvu, nvl, nks_lo, nks_hi, nkz_lo, nkz_hi, nvs, nvz = _load_page(
                        KU, KL, VU, VL, KS, KZ, VS, VZ, pg_next, h64, spl_p, spl_h, spl_n, sks_p, sks_h, svs_p,
                        svs_h, n, dh, dmask, DH, j + 1 < j1)
                    pg_next = tl.load(pt_row + (j + 2) * spt_j, mask=j + 2 < j1, other=0).to(tl.int64)
                    m, l, acc_lo, acc_hi = _int8_page(
                        ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz, q16_lo, q16_hi, qk_scale, kq_scale,
                        m, l, acc_lo, acc_hi, j, own_page, row_ok, slot, g, n_front, rblk, n_scored,
                        SCORES + b * ssc_b + h64 * ssc_h + j * ssc_j, P, G, BLOCK_G, HAS_SCORES)
                    ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz = \
                        nku, nkl, nvu, nvl, nks_lo, nks_hi, nkz_lo, nkz_hi, nvs, nvz
            else:
                for j in tl.range(j0, j1, num_stages=NUM_STAGES):
                    pg = tl.load(pt_row + j * spt_j).to(tl.int64)
                    ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz = _load_page(
                        KU, KL, VU, VL, KS, KZ, VS, VZ, pg, h64, spl_p, spl_h, spl_n, sks_p, sks_h, svs_p, svs_h,
                        n, dh, dmask, DH)
                    m, l, acc_lo, acc_hi = _int8_page(
                        ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz, q16_lo, q16_hi, qk_scale, kq_scale,
                        m, l, acc_lo, acc_hi, j, own_page, row_ok, slot, g, n_front, rblk, n_scored,
                        SCORES + b * ssc_b + h64 * ssc_h + j * ssc_j, P, G, BLOCK_G, HAS_SCORES)
            acc_lo = acc_lo * 0.0625
            acc_hi = acc_hi * 0.0625

        # ---- partials [B, NQ, Hq, S1] (m, l) and [B, NQ, Hq, S1, 2*DH] (acc) ------------------------------------
        prow = ((b * NQ + i.to(tl.int64)) * HQ + hq.to(tl.int64)) * S1 + split
        tl.store(PM + prow, m, mask=row_ok)
        tl.store(PL + prow, l, mask=row_ok)
        a_ptr = PACC + prow[:, None] * (2 * DH) + dh[None, :]
        tl.store(a_ptr, acc_lo, mask=qmask)
        tl.store(a_ptr + DH, acc_hi, mask=qmask)


@triton.jit(do_not_specialize=["NQ"])
def _verify_merge_kernel(
    PM, PL, PACC, QSTART, OUT, NQ, HQ, S1, C, so_b, so_n, so_h,
    P: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_S: tl.constexpr,
):
    """Rows (b, i, BLOCK_H heads): out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s. Everything is per row
    (reductions run over the split axis only), so a row's result does not depend on its neighbours."""
    hh = tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)
    i = tl.program_id(1).to(tl.int64)
    b = tl.program_id(2).to(tl.int64)
    q_start = tl.load(QSTART + b)
    n_used = 1 + (((q_start + NQ - 1) // P) + C - 1) // C  # hot split + page splits that stage 1 wrote
    h_ok = hh < HQ
    row = ((b * NQ + i) * HQ + hh.to(tl.int64)) * S1  # [BLOCK_H]
    so = tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
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


def verify_attention(q, store, page_table, q_start, hot_k, hot_v, hot_slot, sm_scale, scores=None, score_rows=None,
                     out=None, prefetch=None):
    # ---- checks ----------------------------------------------------------------------------------------------------
    B, NQ, Hq, D = q.shape
    NPAGES, Hkv, P, DH = store.k_upper.shape
    assert q.dtype in (torch.float16, torch.bfloat16), q.dtype
    assert D == 2 * DH and DH >= 16 and Hq % Hkv == 0 and 1 <= NQ <= P, (q.shape, store.k_upper.shape)
    G = Hq // Hkv
    assert q.stride(3) == 1
    planes = (store.k_upper, store.k_lower, store.v_upper, store.v_lower)
    for t in planes:
        assert t.dtype == torch.uint8 and t.shape == planes[0].shape and t.stride() == planes[0].stride()
    assert planes[0].stride(3) == 1
    for s_, z_, shape in ((store.k_scale, store.k_zero, (NPAGES, Hkv, D)), (store.v_scale, store.v_zero,
                                                                             (NPAGES, Hkv, P))):
        assert s_.dtype == z_.dtype == torch.float16 and s_.shape == z_.shape == shape and s_.stride() == z_.stride()
        assert s_.stride(2) == 1
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
    # ---- allocate ----------------------------------------------------------------------------------------------------
    if out is None:
        out = torch.empty_like(q)
    assert out.shape == q.shape and out.dtype == q.dtype and out.stride(3) == 1
    if B == 0:
        return out
    C = pages_per_split(B, Hkv, MAXP, P, q.device)
    S1 = 1 + triton.cdiv(MAXP, C)  # split 0 = ring, then page splits
    BLOCK_M = block_rows(G)
    RB = triton.cdiv(NQ * G, BLOCK_M)
    assert S1 < 65536 and B < 65536, "grid axes 1 and 2 are limited to 65535"
    pm = torch.empty((B, NQ, Hq, S1), dtype=torch.float32, device=q.device)
    pl = torch.empty_like(pm)
    pacc = torch.empty((B, NQ, Hq, S1, D), dtype=torch.float32, device=q.device)
    sc = scores if scores is not None else pm  # dummy pointer, never touched when HAS_SCORES is False
    big = BLOCK_M * max(DH, P) >= 32 * 64
    pf = PREFETCH if prefetch is None else bool(prefetch)
    # ---- launch ------------------------------------------------------------------------------------------------------
    _verify_attention_kernel[(Hkv * RB, S1, B)](
        Q=q, KU=store.k_upper, KL=store.k_lower, VU=store.v_upper, VL=store.v_lower, KS=store.k_scale,
        KZ=store.k_zero, VS=store.v_scale, VZ=store.v_zero, PT=page_table, QSTART=q_start, HK=hot_k, HV=hot_v,
        HSLOT=hot_slot, PM=pm, PL=pl, PACC=pacc, SCORES=sc,
        qk_scale=float(sm_scale) * LOG2E, NQ=NQ, HQ=Hq, S1=S1, C=C, RB=RB, ra=ra, rb=rb,
        n_front=1 if ra == rb else 2, lo_r=min(ra, rb), hi_r=max(ra, rb),
        sq_b=q.stride(0), sq_n=q.stride(1), sq_h=q.stride(2),
        spl_p=planes[0].stride(0), spl_h=planes[0].stride(1), spl_n=planes[0].stride(2),
        sks_p=store.k_scale.stride(0), sks_h=store.k_scale.stride(1),
        svs_p=store.v_scale.stride(0), svs_h=store.v_scale.stride(1),
        spt_b=page_table.stride(0), spt_j=page_table.stride(1),
        shk_s=hot_k.stride(0), shk_r=hot_k.stride(1), shk_n=hot_k.stride(2), shk_h=hot_k.stride(3),
        ssc_b=sc.stride(0), ssc_h=sc.stride(1), ssc_j=sc.stride(2),
        G=G, P=P, DH=DH, BLOCK_DH=triton.next_power_of_2(DH), BLOCK_M=BLOCK_M,
        BLOCK_G=triton.next_power_of_2(G), HAS_SCORES=scores is not None, NUM_STAGES=NUM_STAGES, PREFETCH=pf,
        num_warps=NUM_WARPS_BIG if big else NUM_WARPS, num_stages=1 if pf else NUM_STAGES,
        **({"maxnreg": MAXNREG} if pf and MAXNREG and q.is_cuda else {}),
    )
    BLOCK_D = triton.next_power_of_2(D)
    BLOCK_H = max(1, min(triton.next_power_of_2(Hq), MERGE_TILE // (MERGE_BLOCK_S * BLOCK_D)))
    _verify_merge_kernel[(triton.cdiv(Hq, BLOCK_H), NQ, B)](
        PM=pm, PL=pl, PACC=pacc, QSTART=q_start, OUT=out, NQ=NQ, HQ=Hq, S1=S1, C=C,
        so_b=out.stride(0), so_n=out.stride(1), so_h=out.stride(2),
        P=P, D=D, BLOCK_D=BLOCK_D, BLOCK_H=BLOCK_H, BLOCK_S=MERGE_BLOCK_S, num_warps=4,
    )
    return out
