"""Triton ``quantize_pages``: full-precision K/V pages -> nibble-plane pages (format in sgl_spec/kvcache/format.py).

One launch quantizes many pages: grid ``(n_pages, Hkv, NK + NV)``. Key groups are per channel over a page's tokens
and value groups per token over head_dim, so a (page, head) splits into independent programs without any
synchronization: NK key programs of CJ channel pairs x P tokens, NV = P / TP value programs of TP tokens x D channels.
Few pages per launch (the server's case: the pages one forward completes) are latency bound, so the programs are
kept small (``launch_config``). Every tile is handled as two halves (channels j and j + D/2), which is exactly the
pair a packed byte holds.

Arithmetic is bit-for-bit the one of ``quantize_groups_ref`` (fp32, same operation order):
* divisions use ``div_rn`` (IEEE round-to-nearest; Triton's default fp32 ``/`` is approximate on NVIDIA GPUs);
* the launch passes ``enable_fp_fusion=False`` so ``(x - z) * inv + 0.5`` is not contracted into an FMA, which would
  round once where the reference rounds twice;
* fp16 rounding down/up of zero/scale emulates ``torch.nextafter`` on the fp16 bit pattern (bitcast to int16).
So codes agree with the reference except where a GPU-vs-CPU difference we did not foresee puts q within float
rounding of a 1/16 boundary; the tests allow exactly that and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.common.pdl import _wait_prior, pdl_kwargs

_SRC_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


@triton.jit
def _fp16_round_down(x):
    """Largest fp16 <= clamp(x, ±65504) (x fp32), returned as fp32. Mirrors kvformat.fp16_round_down."""
    xc = tl.minimum(tl.maximum(x, -65504.0), 65504.0)
    h = xc.to(tl.float16)
    bits = h.to(tl.int16, bitcast=True).to(tl.int32)
    # nextafter(h, -inf): positive -> one ulp down; +0 -> -min_subnormal (0x8001); negative (incl. -0) -> magnitude up
    down = tl.where(bits > 0, bits - 1, tl.where(bits == 0, -32767, bits + 1))
    h_down = down.to(tl.int16).to(tl.float16, bitcast=True)
    return tl.where(h.to(tl.float32) > xc, h_down.to(tl.float32), h.to(tl.float32))


@triton.jit
def _fp16_round_up(x):
    """Smallest fp16 >= clamp(x, ±65504) (x fp32), returned as fp32. Mirrors kvformat.fp16_round_up."""
    xc = tl.minimum(tl.maximum(x, -65504.0), 65504.0)
    h = xc.to(tl.float16)
    bits = h.to(tl.int16, bitcast=True).to(tl.int32)
    # nextafter(h, +inf): positive or +0 -> one ulp up; -0 (-32768) -> +min_subnormal; negative -> magnitude down
    up = tl.where(bits >= 0, bits + 1, tl.where(bits == -32768, 1, bits - 1))
    h_up = up.to(tl.int16).to(tl.float16, bitcast=True)
    return tl.where(h.to(tl.float32) < xc, h_up.to(tl.float32), h.to(tl.float32))


@triton.jit
def _scale_zero(mn, mx):
    """(scale, zero) as fp32 values exactly representable in fp16, and the reciprocal of the scale (0 if s == 0)."""
    zero = _fp16_round_down(mn)
    scale = tl.maximum(_fp16_round_up(tl.math.div_rn(mx - zero, 15.0)), 0.0)
    inv = tl.where(scale > 0, tl.math.div_rn(1.0, tl.where(scale > 0, scale, 1.0)), 0.0)
    return scale, zero, inv


@triton.jit
def _codes(x, z, inv):
    """Upper code u in [0, 15] and lower code l + 8 in [0, 15] (int32), same op order as quantize_groups_ref."""
    q = (x - z) * inv
    u = tl.minimum(tl.maximum(tl.floor(q + 0.5), 0.0), 15.0)
    r16 = (q - u) * 16.0
    l = tl.minimum(tl.maximum(tl.floor(r16), -8.0), 7.0)
    return u.to(tl.int32), (l + 8.0).to(tl.int32)


@triton.jit
def _min_max(amin, amax, bmin, bmax):
    return tl.minimum(amin, bmin), tl.maximum(amax, bmax)


@triton.jit
def _min_max2(amin, amax, a2min, a2max, bmin, bmax, b2min, b2max):
    return tl.minimum(amin, bmin), tl.maximum(amax, bmax), tl.minimum(a2min, b2min), tl.maximum(a2max, b2max)


@triton.jit
def _key_chunk(src, s_t, s_h, s_d, row0, h, page, c,
               up_ptr, lo_ptr, sc_ptr, zp_ptr, p_page, p_h, p_n, p_j, g_page, g_h, g_i,
               P: tl.constexpr, DH: tl.constexpr, CJ: tl.constexpr, EVEN: tl.constexpr):
    """Keys, channel pairs j = c*CJ … c*CJ+CJ-1 (and j + D/2) of one (page, head): groups are per channel over the
    page's P tokens, so channel chunks are independent. A [P, CJ] tile per half.

    Layout: the key row/head strides and the key plane's page/head strides are not specialized on 16-divisibility
    (the kernel's decorator), so Triton cannot vectorize along channels and gives each thread ONE channel and
    several tokens. The per-channel (scale, zero) arithmetic (two IEEE divisions, two directed fp16 roundings) is
    then done once per half per thread, not once per channel of a 4-wide vector (where each of those is repeated
    by the 16 lanes that share the channel): sm_90 SASS of this branch for P=64, CJ=8, 4 warps went from 1024 to
    490 instructions per thread, and from 18 to 2 barriers (with the single 4-statistic reduction below)."""
    # int64 only in the scalar page/row bases; offsets inside a tile are int32 (the launcher checks they fit)
    n = tl.arange(0, P)
    j = c * CJ + tl.arange(0, CJ)
    tile = src + row0 * s_t + h * s_h + n[:, None] * s_t
    dst = page * p_page + h * p_h + n[:, None] * p_n + j[None, :] * p_j
    sc_ptr = sc_ptr + page * g_page + h * g_h
    zp_ptr = zp_ptr + page * g_page + h * g_h
    if EVEN:  # every chunk is full (D/2 % CJ == 0): no masks
        xa = tl.load(tile + j[None, :] * s_d).to(tl.float32)  # channels j
        xb = tl.load(tile + (j[None, :] + DH) * s_d).to(tl.float32)  # channels j + D/2
    else:
        m2 = (n[:, None] < P) & (j < DH)[None, :]
        xa = tl.load(tile + j[None, :] * s_d, mask=m2, other=0.0).to(tl.float32)
        xb = tl.load(tile + (j[None, :] + DH) * s_d, mask=m2, other=0.0).to(tl.float32)
    # one reduction for the four statistics: one cross-warp exchange instead of four
    mna, mxa, mnb, mxb = tl.reduce((xa, xa, xb, xb), 0, _min_max2)
    sa, za, inva = _scale_zero(mna, mxa)
    sb, zb, invb = _scale_zero(mnb, mxb)
    ua, la = _codes(xa, za[None, :], inva[None, :])
    ub, lb = _codes(xb, zb[None, :], invb[None, :])
    if EVEN:
        tl.store(sc_ptr + j * g_i, sa.to(tl.float16))
        tl.store(zp_ptr + j * g_i, za.to(tl.float16))
        tl.store(sc_ptr + (j + DH) * g_i, sb.to(tl.float16))
        tl.store(zp_ptr + (j + DH) * g_i, zb.to(tl.float16))
        tl.store(up_ptr + dst, (ua | (ub << 4)).to(tl.uint8))
        tl.store(lo_ptr + dst, (la | (lb << 4)).to(tl.uint8))
    else:
        jm = j < DH
        tl.store(sc_ptr + j * g_i, sa.to(tl.float16), mask=jm)
        tl.store(zp_ptr + j * g_i, za.to(tl.float16), mask=jm)
        tl.store(sc_ptr + (j + DH) * g_i, sb.to(tl.float16), mask=jm)
        tl.store(zp_ptr + (j + DH) * g_i, zb.to(tl.float16), mask=jm)
        tl.store(up_ptr + dst, (ua | (ub << 4)).to(tl.uint8), mask=m2)
        tl.store(lo_ptr + dst, (la | (lb << 4)).to(tl.uint8), mask=m2)


@triton.jit
def _value_chunk(src, s_t, s_h, s_d, row0, h, page, c,
                 up_ptr, lo_ptr, sc_ptr, zp_ptr, p_page, p_h, p_n, p_j, g_page, g_h, g_i,
                 DH: tl.constexpr, BLOCK_DH: tl.constexpr, TP: tl.constexpr):
    """Values, tokens n = c*TP … c*TP+TP-1 of one (page, head): groups are per token over all D channels, so token
    chunks are independent. A [TP, D/2] tile per half; loads are vectorized along channels (a token's group is
    spread over the lanes of one warp, so its statistics need shuffles but no cross-warp exchange)."""
    n = c * TP + tl.arange(0, TP)
    j = tl.arange(0, BLOCK_DH)
    tile = src + row0 * s_t + h * s_h + n[:, None] * s_t
    dst = page * p_page + h * p_h + n[:, None] * p_n + j[None, :] * p_j
    sc_ptr = sc_ptr + page * g_page + h * g_h
    zp_ptr = zp_ptr + page * g_page + h * g_h
    if BLOCK_DH == DH:  # no masks (TP divides P)
        xa = tl.load(tile + j[None, :] * s_d).to(tl.float32)
        xb = tl.load(tile + (j[None, :] + DH) * s_d).to(tl.float32)
        # min/max of a token over both halves: elementwise first (exact), then one reduction of the two statistics
        mn, mx = tl.reduce((tl.minimum(xa, xb), tl.maximum(xa, xb)), 1, _min_max)
    else:
        m2 = (n[:, None] >= 0) & (j < DH)[None, :]
        xa = tl.load(tile + j[None, :] * s_d, mask=m2, other=0.0).to(tl.float32)
        xb = tl.load(tile + (j[None, :] + DH) * s_d, mask=m2, other=0.0).to(tl.float32)
        mn, mx = tl.reduce((tl.where(m2, tl.minimum(xa, xb), float("inf")),
                            tl.where(m2, tl.maximum(xa, xb), -float("inf"))), 1, _min_max)
    s, z, inv = _scale_zero(mn, mx)
    ua, la = _codes(xa, z[:, None], inv[:, None])
    ub, lb = _codes(xb, z[:, None], inv[:, None])
    tl.store(sc_ptr + n * g_i, s.to(tl.float16))
    tl.store(zp_ptr + n * g_i, z.to(tl.float16))
    if BLOCK_DH == DH:
        tl.store(up_ptr + dst, (ua | (ub << 4)).to(tl.uint8))
        tl.store(lo_ptr + dst, (la | (lb << 4)).to(tl.uint8))
    else:
        tl.store(up_ptr + dst, (ua | (ub << 4)).to(tl.uint8), mask=m2)
        tl.store(lo_ptr + dst, (la | (lb << 4)).to(tl.uint8), mask=m2)


# The key source strides are not specialized on 16-divisibility: see _key_chunk (layout: one channel per thread).
@triton.jit(do_not_specialize_on_alignment=["sk_t", "sk_h", "kp_page", "kp_h"])
def _quantize_pages_kernel(
    k_ptr, v_ptr, row_ptr, page_ptr,
    ku_ptr, kl_ptr, vu_ptr, vl_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr,
    sk_t, sk_h, sk_d, sv_t, sv_h, sv_d,
    kp_page, kp_h, kp_n, kp_j, vp_page, vp_h, vp_n, vp_j,
    kg_page, kg_h, kg_d, vg_page, vg_h, vg_n,
    P: tl.constexpr, DH: tl.constexpr, BLOCK_DH: tl.constexpr, CJ: tl.constexpr, TP: tl.constexpr,
    NK: tl.constexpr, EVEN_K: tl.constexpr, PDL: tl.constexpr = False,
):
    # grid (n, H, NK + P // TP): the last axis is a key channel chunk (< NK) or a value token chunk
    _wait_prior(PDL)
    i = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    c = tl.program_id(2)
    row0 = tl.load(row_ptr + i).to(tl.int64)
    page = tl.load(page_ptr + i).to(tl.int64)
    if c < NK:
        _key_chunk(k_ptr, sk_t, sk_h, sk_d, row0, h, page, c, ku_ptr, kl_ptr, ks_ptr, kz_ptr,
                   kp_page, kp_h, kp_n, kp_j, kg_page, kg_h, kg_d, P, DH, CJ, EVEN_K)
    else:
        _value_chunk(v_ptr, sv_t, sv_h, sv_d, row0, h, page, c - NK, vu_ptr, vl_ptr, vs_ptr, vz_ptr,
                     vp_page, vp_h, vp_n, vp_j, vg_page, vg_h, vg_n, DH, BLOCK_DH, TP)


def launch_config(P: int, D: int, tiles: int):
    """(key channel pairs per program, value tokens per program, num_warps) for ``tiles`` = pages x heads.

    The server quantizes a few pages per layer and forward (1..32 requests x 8 heads), which is latency bound: each
    (page, head) is split into small programs of 8 source elements per thread (P=64, D=128: 16 programs per page
    and head, one page of 8 heads on 128 SMs) so that each program's serial chain (load -> reduce -> scale ->
    codes -> store) is short. Many tiles (batch 32, prefill) are instruction bound instead: each thread's fixed
    part (addresses, reductions, the group arithmetic: ~250 sm_90 instructions) is amortized over 16 or 32
    elements (~20-26 instructions each)."""
    half = triton.next_power_of_2(D // 2)
    ept = 8 if tiles <= 64 else 16 if tiles <= 256 else 32  # source elements per thread
    nw = 4
    return max(1, min(half, ept * 16 * nw // P)), max(1, min(P, ept * 16 * nw // half)), nw


@dataclass(frozen=True)
class QuantizeLaunch:
    """Fixed launch parameters for tests and benchmarks (``quantize_pages(..., launch=QuantizeLaunch(...))``; a
    field left None takes ``launch_config``'s): ``key_cols`` (channel pairs per key program), ``val_rows`` (tokens
    per value program), ``num_warps``; powers of 2. Every choice writes identical bytes."""
    key_cols: Optional[int] = None
    val_rows: Optional[int] = None
    num_warps: Optional[int] = None


def _check_pair(a: torch.Tensor, b: torch.Tensor, shape, dtype, what: str):
    for t in (a, b):
        if tuple(t.shape) != tuple(shape) or t.dtype != dtype:
            raise ValueError(f"{what}: expected {tuple(shape)} {dtype}, got {tuple(t.shape)} {t.dtype}")
    if a.stride() != b.stride():
        raise ValueError(f"{what}: the two tensors must share strides (one stride set is passed to the kernel)")


def quantize_pages(src_k, src_v, src_row, page_ids, store, *, launch: QuantizeLaunch | None = None):
    """Quantize pages ``page_ids[i]`` of ``store`` (PageStore, written in place) from rows
    ``src_row[i] … src_row[i]+P-1`` of ``src_k``/``src_v`` [T, Hkv, D] (any strides). Returns ``store``.
    ``launch``: a QuantizeLaunch fixing the launch (tests, benchmarks); None: ``launch_config``."""
    if src_k.dim() != 3 or src_k.shape != src_v.shape:
        raise ValueError(f"src_k/src_v must be [T, H, D] of equal shape, got {tuple(src_k.shape)} {tuple(src_v.shape)}")
    if src_k.dtype not in _SRC_DTYPES or src_v.dtype != src_k.dtype:
        raise ValueError(f"src_k/src_v must share a dtype in {_SRC_DTYPES}, got {src_k.dtype} {src_v.dtype}")
    _, H, D = src_k.shape
    NP, Hs, P, DH = store.k_upper.shape
    if P & (P - 1) or Hs != H or 2 * DH != D:
        raise ValueError(f"store planes {tuple(store.k_upper.shape)} do not match src heads/head_dim {H}/{D} "
                         "(or the page size is not a power of 2)")
    _check_pair(store.k_upper, store.k_lower, (NP, H, P, DH), torch.uint8, "k planes")
    _check_pair(store.v_upper, store.v_lower, (NP, H, P, DH), torch.uint8, "v planes")
    _check_pair(store.k_scale, store.k_zero, (NP, H, D), torch.float16, "k_scale/k_zero")
    _check_pair(store.v_scale, store.v_zero, (NP, H, P), torch.float16, "v_scale/v_zero")
    if src_row.dim() != 1 or page_ids.dim() != 1 or src_row.shape != page_ids.shape:
        raise ValueError(f"src_row/page_ids must be 1-D of equal length, got {tuple(src_row.shape)} "
                         f"{tuple(page_ids.shape)}")
    if src_row.dtype not in (torch.int32, torch.int64) or page_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"src_row/page_ids must be integer tensors, got {src_row.dtype} {page_ids.dtype}")
    devs = {t.device for t in (src_k, src_v, src_row, page_ids, store.k_upper, store.v_upper, store.k_scale,
                               store.v_scale)}
    if len(devs) != 1:
        raise ValueError(f"all tensors must be on one device, got {devs}")
    n = src_row.shape[0]
    if n == 0:
        return store
    # offsets inside one tile are int32 in the kernel (row and page bases are int64): check the spans fit
    spans = [P * abs(t.stride(0)) + D * abs(t.stride(2)) for t in (src_k, src_v)]
    spans += [P * abs(t.stride(2)) + DH * abs(t.stride(3)) for t in (store.k_upper, store.v_upper)]
    spans += [D * abs(store.k_scale.stride(2)), P * abs(store.v_scale.stride(2))]
    if max(spans) >= 2**31:
        raise ValueError(f"strides too large for int32 offsets inside one page tile: {max(spans)}")
    src_row, page_ids = src_row.contiguous(), page_ids.contiguous()
    half = triton.next_power_of_2(DH)
    cj, tp, nw = launch_config(P, D, n * H)
    lc = launch or QuantizeLaunch()
    cj, tp, nw = lc.key_cols or cj, lc.val_rows or tp, lc.num_warps or nw
    for name, val, hi in (("key_cols", cj, half), ("val_rows", tp, P), ("num_warps", nw, 32)):
        if val & (val - 1) or not 1 <= val <= hi:
            raise ValueError(f"{name} must be a power of 2 in [1, {hi}], got {val}")
    nk = triton.cdiv(DH, cj)
    _quantize_pages_kernel[(n, H, nk + P // tp)](
        k_ptr=src_k, v_ptr=src_v, row_ptr=src_row, page_ptr=page_ids,
        ku_ptr=store.k_upper, kl_ptr=store.k_lower, vu_ptr=store.v_upper, vl_ptr=store.v_lower,
        ks_ptr=store.k_scale, kz_ptr=store.k_zero, vs_ptr=store.v_scale, vz_ptr=store.v_zero,
        sk_t=src_k.stride(0), sk_h=src_k.stride(1), sk_d=src_k.stride(2),
        sv_t=src_v.stride(0), sv_h=src_v.stride(1), sv_d=src_v.stride(2),
        kp_page=store.k_upper.stride(0), kp_h=store.k_upper.stride(1),
        kp_n=store.k_upper.stride(2), kp_j=store.k_upper.stride(3),
        vp_page=store.v_upper.stride(0), vp_h=store.v_upper.stride(1),
        vp_n=store.v_upper.stride(2), vp_j=store.v_upper.stride(3),
        kg_page=store.k_scale.stride(0), kg_h=store.k_scale.stride(1), kg_d=store.k_scale.stride(2),
        vg_page=store.v_scale.stride(0), vg_h=store.v_scale.stride(1), vg_n=store.v_scale.stride(2),
        P=P, DH=DH, BLOCK_DH=half, CJ=cj, TP=tp, NK=nk, EVEN_K=DH % cj == 0,
        num_warps=nw, enable_fp_fusion=False, **pdl_kwargs(src_k.device),
    )
    return store
