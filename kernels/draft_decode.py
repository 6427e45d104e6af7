"""Triton ``draft_decode``: split-KV, GQA-aware decode attention over the 4-bit upper plane (+ the hot ring).

Contract in docs/CONTRACTS.md; page format in sgl_spec/kvformat.py; pure-torch twin in draft_decode_ref.py.

Design (bandwidth bound: a draft step streams ~4.3 bits/element of K and V and nothing else):

* Stage 1, grid ``(B, Hkv, 1 + NUM_SPLITS)``. A program serves the ``G = Hq/Hkv`` query heads of one KV head (padded
  to GPAD >= 16 for ``tl.dot``), so every page byte is read once per KV head, not once per query head.
  Program ``s == 0`` attends to the hot tokens only (<= 2 ring pages in the model dtype), so it runs beside the page
  splits instead of lengthening one of them; it comes first in launch order so it never forms a tail.
  Programs ``s >= 1`` take a contiguous share ``cdiv(num_pages[b], NUM_SPLITS)`` of the request's page list, one page
  (P tokens) per iteration; the loop is left to Triton's software pipeliner (NUM_STAGES), which turns the byte-tile
  loads into multi-buffered cp.async copies.
* Keys never get dequantized: with per-channel (scale s, zero z) per page, ``q·k_n = Σ_j (q_j s_j) u_nj + q·z``, so the
  scale is folded into q once per page (fp16 operand) and the codes go to the tensor cores as exact fp16 integers;
  ``q·z`` is a per-page constant. Values have per-token (s, z): ``Σ_n p_n (s_n u_n + z_n) = (p ∘ s) U + Σ_n p_n z_n``,
  the zero term is one scalar per row added to every channel at the end.
* Scores are computed transposed, ``[P, GPAD] = K (q∘s)^T``: the key tile is then the A operand with the contraction
  over its contiguous channel dim (on Hopper a wgmma with A in registers; the uint8 tile goes through shared memory,
  not a 4x larger fp16 copy), and the value tile is the B operand of ``p V``.
* Byte ``j`` of a packed row holds channel ``j`` (low nibble) and ``j + D/2`` (high nibble), so one byte tile gives
  the two contiguous halves of the head dim; q, the scales and the accumulators are kept as (lo, hi) halves.
  Codes enter the dots centred, ``u - 8`` (the ``8 s`` goes into the zero term), to halve the magnitude that fp16
  rounding of q*s acts on. The high nibble is used as ``16 (u - 8)`` (masked, not shifted) and the 1/16 is folded
  into q's scale / the final accumulator (exact: a power of two).
* Nibbles become fp16 by the magic-number trick (``0x6400 | x`` is the fp16 1024 + x, x < 1024), all integer/bitcast
  ops that Triton keeps in 16-bit lanes: integer->float conversion instructions run at 1/4 rate on Hopper and would
  rival the memory time. The same code runs in the interpreter.
* Online softmax in fp32, base 2 (sm_scale·log2 e folded into q). The row sums (l and the value zero term) are
  accumulated per (token, head) and reduced once after the loop, leaving two reductions per page (max, q·z).
  Each stage-1 program writes (m, l, unnormalized acc) per query head; stage 2 (one program per query head) merges
  the 1 + NUM_SPLITS partials.
* NUM_SPLITS depends only on shapes and the SM count (no host sync; CUDA-graph capturable with fixed shapes,
  num_pages varies as data). Splits beyond a short list simply find no pages and write an empty partial.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from sgl_spec.kvformat import PageStore

RING = 2
_RING_C = tl.constexpr(RING)  # jit functions only see constexpr globals
# Split heuristic: one wave of page-split programs (floor, so the wave is never overfilled) with
# WARPS_PER_SM resident warps per SM (2 programs of 4 warps at ~214 registers, 1 of 8 warps for P = 128), never fewer
# than MIN_PAGES_PER_SPLIT pages per split when the page list is full (more splits only add merge traffic).
WARPS_PER_SM = 8
MIN_PAGES_PER_SPLIT = 4
MAX_SPLITS = 256
# Page loop pipelining depth. Warps: 4 while the score tile P x GPAD <= 64 x 16 (one wgmma warpgroup, ~214 registers),
# else 8 (P = 128 or G > 16 spill at 4 warps; checked with ptxas for sm_90).
NUM_STAGES = 3
_LOG2E = 1.4426950408889634


@triton.jit
def _nib_lo(x):
    """uint8 tile -> (low nibble - 8) as fp16, exact. Centred codes carry half the magnitude (hence half the fp16
    rounding of q*s) of uncentred ones."""
    x16 = x.to(tl.int16)
    return ((x16 & 15) | 0x6400).to(tl.float16, bitcast=True) - 1032.0


@triton.jit
def _nib_hi(x):
    """uint8 tile -> 16 * (high nibble - 8) as fp16, exact (masked in place, no shift)."""
    x16 = x.to(tl.int16)
    return ((x16 & 240) | 0x6400).to(tl.float16, bitcast=True) - 1152.0


@triton.jit
def _load_page(ku_ptr, vu_ptr, s_up, s_uh, ks_ptr, kz_ptr, s_ksp, s_ksh, vs_ptr, vz_ptr, s_vsp, s_vsh,
               page, ok, h, offs_n, offs_c, c_ok, HALF: tl.constexpr):
    """One page's draft tiles for KV head h: key/value bytes [P, BLOCK_C] and the fp16 scale/zero vectors."""
    pg = page.to(tl.int64)
    tile = pg * s_up + h * s_uh + offs_n[:, None].to(tl.int64) * HALF + offs_c[None, :]
    m2 = ok & c_ok[None, :]
    kb = tl.load(ku_ptr + tile, mask=m2, other=0, cache_modifier=".cg")
    vb = tl.load(vu_ptr + tile, mask=m2, other=0, cache_modifier=".cg")
    kcol = pg * s_ksp + h * s_ksh + offs_c
    m1 = ok & c_ok
    ks_lo = tl.load(ks_ptr + kcol, mask=m1, other=0.0, eviction_policy="evict_first")
    ks_hi = tl.load(ks_ptr + kcol + HALF, mask=m1, other=0.0, eviction_policy="evict_first")
    kz_lo = tl.load(kz_ptr + kcol, mask=m1, other=0.0, eviction_policy="evict_first")
    kz_hi = tl.load(kz_ptr + kcol + HALF, mask=m1, other=0.0, eviction_policy="evict_first")
    vrow = pg * s_vsp + h * s_vsh + offs_n
    vsc = tl.load(vs_ptr + vrow, mask=ok, other=0.0, eviction_policy="evict_first")
    vzr = tl.load(vz_ptr + vrow, mask=ok, other=0.0, eviction_policy="evict_first")
    return kb, vb, ks_lo, ks_hi, kz_lo, kz_hi, vsc, vzr


@triton.jit
def _attend_page(m_i, l_t, z_t, acc_lo, acc_hi, qt_lo, qt_hi, kb, vb, ks_lo, ks_hi, kz_lo, kz_hi, vsc, vzr):
    """Online-softmax update with one quantized page. Scores [P, GPAD] in log2 units; l_t / z_t are the per-(token,
    head) running sums of p and p * (value zero term); acc_hi holds 16x the high channels."""
    qs_lo = (qt_lo * ks_lo.to(tl.float32)[:, None]).to(tl.float16)  # [BLOCK_C, GPAD]
    qs_hi = (qt_hi * (ks_hi.to(tl.float32) * 0.0625)[:, None]).to(tl.float16)
    # centred codes: z + s u = (z + 8 s) + s (u - 8)
    kc_lo = kz_lo.to(tl.float32) + 8.0 * ks_lo.to(tl.float32)
    kc_hi = kz_hi.to(tl.float32) + 8.0 * ks_hi.to(tl.float32)
    qz = tl.sum(qt_lo * kc_lo[:, None], 0) + tl.sum(qt_hi * kc_hi[:, None], 0)  # [GPAD]
    sc = tl.dot(_nib_lo(kb), qs_lo)
    sc = tl.dot(_nib_hi(kb), qs_hi, sc)
    sc = sc + qz[None, :]
    m_new = tl.maximum(m_i, tl.max(sc, 0))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(sc - m_new[None, :])
    vs = vsc.to(tl.float32)
    l_t = l_t * alpha[None, :] + p
    z_t = z_t * alpha[None, :] + p * (vzr.to(tl.float32) + 8.0 * vs)[:, None]
    ps = tl.trans((p * vs[:, None]).to(tl.float16))  # [GPAD, P]
    a = alpha[:, None]
    acc_lo = tl.dot(ps, _nib_lo(vb), acc_lo * a)
    acc_hi = tl.dot(ps, _nib_hi(vb), acc_hi * a)
    return m_new, l_t, z_t, acc_lo, acc_hi


@triton.jit
def _store_partial(m_ptr, l_ptr, acc_ptr, prow, g_ok, offs_c, c_ok, m_i, l_i, acc_lo, acc_hi, HALF: tl.constexpr):
    tl.store(m_ptr + prow, m_i, mask=g_ok)
    tl.store(l_ptr + prow, l_i, mask=g_ok)
    a = acc_ptr + prow[:, None] * (2 * HALF) + offs_c[None, :]
    msk = g_ok[:, None] & c_ok[None, :]
    tl.store(a, acc_lo, mask=msk)
    tl.store(a + HALF, acc_hi, mask=msk)


@triton.jit
def _draft_decode_kernel(
    q_ptr, s_qb, s_qh,
    ku_ptr, vu_ptr, s_up, s_uh,
    ks_ptr, kz_ptr, s_ksp, s_ksh,
    vs_ptr, vz_ptr, s_vsp, s_vsh,
    pid_ptr, s_pb, np_ptr, MAXP,
    hk_ptr, hv_ptr, s_hs, s_hr, s_hn, s_hh,
    hslot_ptr, hstart_ptr, hlen_ptr,
    m_ptr, l_ptr, acc_ptr,
    qk_scale,
    G: tl.constexpr, GPAD: tl.constexpr, HALF: tl.constexpr, BLOCK_C: tl.constexpr, P: tl.constexpr,
    NUM_SPLITS: tl.constexpr, HOT_PREC: tl.constexpr, HOT_BLOCK: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.program_id(2)
    hq = tl.num_programs(1) * G
    offs_g = tl.arange(0, GPAD)
    offs_c = tl.arange(0, BLOCK_C)
    offs_n = tl.arange(0, P)
    g_ok = offs_g < G
    if BLOCK_C == HALF:  # a splat mask keeps the byte loads vectorized
        c_ok = tl.full([BLOCK_C], 1, tl.int1)
    else:
        c_ok = offs_c < HALF
    rows = h * G + offs_g
    q_row = q_ptr + b.to(tl.int64) * s_qb + rows.to(tl.int64) * s_qh
    prow = (b * hq + rows).to(tl.int64) * (1 + NUM_SPLITS) + s

    m_i = tl.full([GPAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GPAD], tl.float32)
    acc_lo = tl.zeros([GPAD, BLOCK_C], tl.float32)
    acc_hi = tl.zeros([GPAD, BLOCK_C], tl.float32)

    if s == 0:
        # ---- hot tokens, full precision: positions hot_start .. hot_start + hot_len - 1 of ring slot hot_slot
        slot = tl.load(hslot_ptr + b).to(tl.int64)
        start = tl.load(hstart_ptr + b)
        hlen = tl.load(hlen_ptr + b)
        # fp32 operands: bf16/fp16 values are exact in tf32, so HOT_PREC="tf32" loses nothing for 16-bit models
        # (fp32 models use "ieee"); the interpreter cannot dot bf16 at all.
        q_ok = g_ok[:, None] & c_ok[None, :]
        qh_lo = tl.load(q_row[:, None] + offs_c[None, :], mask=q_ok, other=0.0).to(tl.float32)
        qh_hi = tl.load(q_row[:, None] + offs_c[None, :] + HALF, mask=q_ok, other=0.0).to(tl.float32)
        offs_t = tl.arange(0, HOT_BLOCK)
        for t0 in range(0, hlen, HOT_BLOCK):
            t = t0 + offs_t
            t_ok = t < hlen
            pos = start + t
            tok = slot * s_hs + ((pos // P) % _RING_C).to(tl.int64) * s_hr + (pos % P).to(tl.int64) * s_hn + h * s_hh
            at = tok[:, None] + offs_c[None, :]
            ok2 = t_ok[:, None] & c_ok[None, :]
            k_lo = tl.load(hk_ptr + at, mask=ok2, other=0.0).to(tl.float32)
            k_hi = tl.load(hk_ptr + at + HALF, mask=ok2, other=0.0).to(tl.float32)
            sc = tl.dot(qh_lo, tl.trans(k_lo), input_precision=HOT_PREC)
            sc = tl.dot(qh_hi, tl.trans(k_hi), sc, input_precision=HOT_PREC)
            sc = tl.where(t_ok[None, :], sc * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(sc, 1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(sc - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v_lo = tl.load(hv_ptr + at, mask=ok2, other=0.0).to(tl.float32)
            v_hi = tl.load(hv_ptr + at + HALF, mask=ok2, other=0.0).to(tl.float32)
            acc_lo = tl.dot(p, v_lo, acc_lo * alpha[:, None], input_precision=HOT_PREC)
            acc_hi = tl.dot(p, v_hi, acc_hi * alpha[:, None], input_precision=HOT_PREC)
            m_i = m_new
        _store_partial(m_ptr, l_ptr, acc_ptr, prow, g_ok, offs_c, c_ok, m_i, l_i, acc_lo, acc_hi, HALF)
    else:
        # ---- this split's contiguous share of the page list
        n = tl.minimum(tl.maximum(tl.load(np_ptr + b), 0), MAXP)
        per = (n + NUM_SPLITS - 1) // NUM_SPLITS
        lo = tl.minimum((s - 1) * per, n)
        hi = tl.minimum(lo + per, n)
        ids = pid_ptr + b.to(tl.int64) * s_pb
        # q^T [BLOCK_C, GPAD] halves, scaled to log2 units
        qt_at = q_row[None, :] + offs_c[:, None]
        qt_ok = g_ok[None, :] & c_ok[:, None]
        qt_lo = tl.load(qt_at, mask=qt_ok, other=0.0).to(tl.float32) * qk_scale
        qt_hi = tl.load(qt_at + HALF, mask=qt_ok, other=0.0).to(tl.float32) * qk_scale
        l_t = tl.zeros([P, GPAD], tl.float32)
        z_t = tl.zeros([P, GPAD], tl.float32)
        for i in range(lo, hi):
            page = tl.load(ids + i)
            kb, vb, ks_lo, ks_hi, kz_lo, kz_hi, vsc, vzr = _load_page(
                ku_ptr, vu_ptr, s_up, s_uh, ks_ptr, kz_ptr, s_ksp, s_ksh, vs_ptr, vz_ptr, s_vsp, s_vsh,
                page, i < hi, h, offs_n, offs_c, c_ok, HALF)
            m_i, l_t, z_t, acc_lo, acc_hi = _attend_page(m_i, l_t, z_t, acc_lo, acc_hi, qt_lo, qt_hi, kb, vb,
                                                         ks_lo, ks_hi, kz_lo, kz_hi, vsc, vzr)
        l_i = tl.sum(l_t, 0)
        z_i = tl.sum(z_t, 0)
        acc_lo = acc_lo + z_i[:, None]
        acc_hi = acc_hi * 0.0625 + z_i[:, None]
        _store_partial(m_ptr, l_ptr, acc_ptr, prow, g_ok, offs_c, c_ok, m_i, l_i, acc_lo, acc_hi, HALF)


@triton.jit
def _draft_decode_merge_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, s_ob, s_oh, HQ,
                               NPART: tl.constexpr, BLOCK_S: tl.constexpr, CHUNK: tl.constexpr,
                               D: tl.constexpr, BLOCK_D: tl.constexpr):
    """One program per (request, query head): out = Σ_s 2^(m_s - M) acc_s / Σ_s 2^(m_s - M) l_s."""
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * NPART
    offs_s = tl.arange(0, BLOCK_S)
    ms = tl.load(m_ptr + base + offs_s, mask=offs_s < NPART, other=float("-inf"))
    big = tl.max(ms, 0)  # finite: the hot partial always holds >= 1 token
    ls = tl.load(l_ptr + base + offs_s, mask=offs_s < NPART, other=0.0)
    denom = tl.sum(tl.exp2(ms - big) * ls, 0)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    acc = tl.zeros([BLOCK_D], tl.float32)
    for c0 in range(0, NPART, CHUNK):
        offs = c0 + tl.arange(0, CHUNK)
        ok = offs < NPART
        w = tl.exp2(tl.load(m_ptr + base + offs, mask=ok, other=float("-inf")) - big)
        a = tl.load(acc_ptr + (base + offs)[:, None] * D + offs_d[None, :], mask=ok[:, None] & d_ok[None, :],
                    other=0.0)
        acc += tl.sum(w[:, None] * a, 0)
    b = pid // HQ
    hq = pid % HQ
    o = out_ptr + b.to(tl.int64) * s_ob + hq.to(tl.int64) * s_oh + offs_d
    tl.store(o, (acc / denom).to(out_ptr.dtype.element_ty), mask=d_ok)


@functools.lru_cache(maxsize=None)
def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 8  # interpreter: small, so tests still exercise several splits
    return torch.cuda.get_device_properties(device).multi_processor_count


def num_warps_for(page_size: int, gpad: int) -> int:
    """4 warps while the score tile P x GPAD <= 64 x 16 (one wgmma warpgroup), else 8 (4 would spill)."""
    return 4 if page_size * gpad <= 1024 else 8


def num_splits_for(batch: int, num_kv_heads: int, max_pages: int, sm_count: int, num_warps: int = 4) -> int:
    """Page splits per (request, KV head), from shapes only (see WARPS_PER_SM / MIN_PAGES_PER_SPLIT)."""
    if max_pages <= 0:
        return 1
    programs_per_sm = max(1, WARPS_PER_SM // num_warps)
    # the hot programs are not counted: they are short and launched first, so they finish before the wave fills
    want = (programs_per_sm * sm_count) // max(1, batch * num_kv_heads)
    cap = triton.cdiv(max_pages, MIN_PAGES_PER_SPLIT)
    return max(1, min(want, cap, MAX_SPLITS))


def _check(name, t, shape, dtypes, device):
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"draft_decode: {name} has shape {tuple(t.shape)}, expected {tuple(shape)}")
    if t.dtype not in dtypes:
        raise ValueError(f"draft_decode: {name} has dtype {t.dtype}, expected one of {dtypes}")
    if t.device != device:
        raise ValueError(f"draft_decode: {name} is on {t.device}, expected {device}")
    if t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"draft_decode: {name} needs a contiguous last dim")


def draft_decode(q, store: PageStore, page_ids, num_pages, hot_k, hot_v, hot_slot, hot_start, hot_len, sm_scale,
                 out=None, num_splits=None):
    """See docs/CONTRACTS.md. ``num_splits`` (keyword, optional) overrides the shape heuristic (tests, tuning)."""
    # ---- checks
    if q.dim() != 3:
        raise ValueError(f"draft_decode: q must be [B, Hq, D], got {tuple(q.shape)}")
    B, Hq, D = q.shape
    dev = q.device
    NP, Hkv, P, half = store.k_upper.shape
    if D % 2 or half * 2 != D or Hq % Hkv:
        raise ValueError(f"draft_decode: q {tuple(q.shape)} does not match pages {tuple(store.k_upper.shape)}")
    fl = (torch.bfloat16, torch.float16, torch.float32)
    _check("q", q, (B, Hq, D), fl, dev)
    for name in ("k_upper", "v_upper"):
        _check(name, getattr(store, name), (NP, Hkv, P, half), (torch.uint8,), dev)
    for name in ("k_scale", "k_zero"):
        _check(name, getattr(store, name), (NP, Hkv, D), (torch.float16,), dev)
    for name in ("v_scale", "v_zero"):
        _check(name, getattr(store, name), (NP, Hkv, P), (torch.float16,), dev)
    maxp = page_ids.shape[1] if page_ids.dim() == 2 else -1
    _check("page_ids", page_ids, (B, maxp), (torch.int32,), dev)
    for name, t in (("num_pages", num_pages), ("hot_slot", hot_slot), ("hot_start", hot_start),
                    ("hot_len", hot_len)):
        _check(name, t, (B,), (torch.int32,), dev)
        if not t.is_contiguous():
            raise ValueError(f"draft_decode: {name} must be contiguous")
    _check("hot_k", hot_k, (hot_k.shape[0], RING, P, Hkv, D), fl, dev)
    _check("hot_v", hot_v, tuple(hot_k.shape), (hot_k.dtype,), dev)
    ku, vu = store.k_upper, store.v_upper
    if ku.stride(-2) != half or vu.stride() != ku.stride():
        raise ValueError("draft_decode: k_upper/v_upper need equal strides and packed [P, D/2] rows")
    if store.k_zero.stride() != store.k_scale.stride() or store.v_zero.stride() != store.v_scale.stride():
        raise ValueError("draft_decode: scale and zero tensors need equal strides")
    if hot_v.stride() != hot_k.stride():
        raise ValueError("draft_decode: hot_k and hot_v need equal strides")

    # ---- allocate
    if out is None:
        out = torch.empty_like(q)
    _check("out", out, (B, Hq, D), (q.dtype,), dev)
    if B == 0:
        return out
    G = Hq // Hkv
    gpad = max(16, triton.next_power_of_2(G))
    nw = num_warps_for(P, gpad)
    ns = int(num_splits) if num_splits is not None else num_splits_for(B, Hkv, maxp, _sm_count(dev), nw)
    if ns < 1:
        raise ValueError(f"draft_decode: num_splits must be >= 1, got {ns}")
    npart = ns + 1
    m_part = torch.empty((B, Hq, npart), dtype=torch.float32, device=dev)
    l_part = torch.empty_like(m_part)
    acc_part = torch.empty((B, Hq, npart, D), dtype=torch.float32, device=dev)

    # ---- launch
    block_c = max(16, triton.next_power_of_2(half))
    _draft_decode_kernel[(B, Hkv, npart)](
        q_ptr=q, s_qb=q.stride(0), s_qh=q.stride(1),
        ku_ptr=ku, vu_ptr=vu, s_up=ku.stride(0), s_uh=ku.stride(1),
        ks_ptr=store.k_scale, kz_ptr=store.k_zero, s_ksp=store.k_scale.stride(0), s_ksh=store.k_scale.stride(1),
        vs_ptr=store.v_scale, vz_ptr=store.v_zero, s_vsp=store.v_scale.stride(0), s_vsh=store.v_scale.stride(1),
        pid_ptr=page_ids, s_pb=page_ids.stride(0), np_ptr=num_pages, MAXP=maxp,
        hk_ptr=hot_k, hv_ptr=hot_v, s_hs=hot_k.stride(0), s_hr=hot_k.stride(1), s_hn=hot_k.stride(2),
        s_hh=hot_k.stride(3),
        hslot_ptr=hot_slot, hstart_ptr=hot_start, hlen_ptr=hot_len,
        m_ptr=m_part, l_ptr=l_part, acc_ptr=acc_part,
        qk_scale=float(sm_scale) * _LOG2E,
        G=G, GPAD=gpad, HALF=half, BLOCK_C=block_c, P=P,
        NUM_SPLITS=ns, HOT_PREC="ieee" if torch.float32 in (q.dtype, hot_k.dtype) else "tf32", HOT_BLOCK=32,
        num_warps=nw, num_stages=NUM_STAGES,
    )
    _draft_decode_merge_kernel[(B * Hq,)](
        m_ptr=m_part, l_ptr=l_part, acc_ptr=acc_part, out_ptr=out, s_ob=out.stride(0), s_oh=out.stride(1), HQ=Hq,
        NPART=npart, BLOCK_S=triton.next_power_of_2(npart), CHUNK=min(16, triton.next_power_of_2(npart)),
        D=D, BLOCK_D=triton.next_power_of_2(D), num_warps=4,
    )
    return out
