"""The hot-token programs of ``draft_decode``'s Gluon page launch (sgl_spec/kernels/draft_decode/gluon_pages.py, ``HS`` > 0):
attention over the request's newest tokens, which sit in the full-precision ring, as ``HS`` more one-warp programs
of the page launch (64 ring tokens each) instead of a Triton launch of their own (sgl_spec/kernels/draft_decode/triton_hot.py, which stays
for 32-bit rings, the Triton engine and batches of many (request, KV head) pairs).

Why: at batch 1 a draft's time is its bytes plus a fixed cost of its launches, and the hot launch's place in the
chain costs ~0.9 µs before the first page load (H100: three empty launches 7.7 µs, two 6.9), whatever its programs do.

The arithmetic of the Triton program with HOT_NATIVE (16-bit operands as stored, fp32 accumulation, p rounded to the
ring's dtype for P·V) on ``mma.sync`` tiles with tokens as M, as in the page programs: ``S^T [32, 8] = K q^T``,
``O^T [128, 8] += V^T p^T``, 32 ring tokens a step. K is loaded straight into its A fragment (channel pairs are
32-bit words). V^T's A fragment wants two tokens of one channel per register: a lane loads 32-bit words (a channel
pair) of two tokens and ``prmt`` swaps their halves, so O^T's rows are channels in the order ``_hot_channel``.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from sgl_spec.kernels.common.gluon_compat import cta_barrier
from sgl_spec.kernels.draft_decode import triton_hot as draft_hot
from sgl_spec.kernels.draft_decode.launch import GLUON_HOT_TOKENS

RING = gl.constexpr(draft_hot.RING)  # ring pages a request
HOT_TOKENS = gl.constexpr(GLUON_HOT_TOKENS)  # ring tokens a program: RING * P / HOT_TOKENS programs a pair
# value words [32 tokens, 64 words] (word w: channels 2w, 2w+1): lane (t = lane % 4, g = lane // 4) holds words
# 8 i + g of tokens 2 t + e + 8 f + 16 k -- the registers V^T's A fragment needs after the halves are swapped
_VW: gl.constexpr = gl.DistributedLinearLayout(
    reg_bases=[[1, 0], [8, 0], [16, 0], [0, 8], [0, 16], [0, 32]],
    lane_bases=[[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]], warp_bases=[], block_bases=[], shape=[32, 64])
# two tokens' words (even $1, odd $2) -> $0: the low halves (channel 2w of both tokens), $3: the high halves
_ASM_SWAP = gl.constexpr("prmt.b32 $0, $2, $3, 0x5410; prmt.b32 $1, $2, $3, 0x7632;")


@gluon.jit
def _hot_channel(m):
    """Head-dim channel at row m of V^T / O^T: m = 16 i + 8 e + g holds channel 2 (8 i + g) + e."""
    return 2 * (8 * (m >> 4) + (m & 7)) + ((m >> 3) & 1)


@gluon.jit
def _ring_rows(hs, pos, s_hr, s_hn, P: gl.constexpr):
    """Offsets of ring positions ``pos`` (request and head offset ``hs``): ring page (pos // P) % RING, row pos % P."""
    return hs + ((pos // P) % RING).to(gl.int64) * s_hr + (pos % P).to(gl.int64) * s_hn


@gluon.jit
def _half_pair(x, dt: gl.constexpr):
    """int32 holding two 16-bit values (bits 0-15, 16-31) -> [..., 2] of the 16-bit dtype dt (a register rename);
    draft_pages_gluon._f16_pair is this at fp16."""
    return gl.join(x.to(gl.int16).to(dt, bitcast=True), (x >> 16).to(gl.int16).to(dt, bitcast=True))


@gluon.jit
def _values_t(words, OP: gl.constexpr, dt: gl.constexpr):
    """Value words [32 tokens, 64] (layout _VW) -> V^T [128, 32 tokens] in the A fragment layout, rows in
    ``_hot_channel`` order."""
    ve, vo = gl.split(gl.permute(gl.reshape(words, [16, 2, 64]), [0, 2, 1]))  # even / odd tokens [16, 64]
    lo, hi = gl.inline_asm_elementwise(_ASM_SWAP, "=r,=r,r,r", [ve, vo], dtype=(gl.int32, gl.int32), is_pure=True,
                                       pack=1)
    t = gl.join(_half_pair(lo, dt), _half_pair(hi, dt))  # [pair 16, w 64, parity 2, e 2]
    t = gl.reshape(t, [16, 8, 8, 2, 2])  # pair, wi, wg, parity, e (w = 8 wi + wg)
    t = gl.permute(t, [1, 4, 2, 0, 3])  # wi, e, wg, pair, parity
    return gl.convert_layout(gl.reshape(t, [128, 32]), OP, assert_trivial=True)


@gluon.jit
def _hot_partial(q_ptr, s_qb, s_qh, hk_ptr, hv_ptr, hvw_ptr, s_hs, s_hr, s_hn, s_hh, hslot_ptr, hstart_ptr, hlen_ptr,
                 nk_ptr, nv_ptr, s_nb, s_nh, m_ptr, l_ptr, acc_ptr, b, h, j, HKV, qk_scale,
                 G: gl.constexpr, NPART: gl.constexpr, NUM_SPLITS: gl.constexpr, P: gl.constexpr,
                 WRITE_NEW: gl.constexpr, MMA: gl.constexpr, OPA: gl.constexpr, OPB: gl.constexpr):
    """Partial (m, l, unnormalized acc) of hot tokens HOT_TOKENS j .. HOT_TOKENS (j + 1) - 1 of positions hot_start
    .. hot_start + hot_len - 1 in ring slot hot_slot, for the G query heads of KV head h (log2 units, as
    sgl_spec/kernels/draft_decode/triton_hot.py; no tokens: m = -inf, l = 0), at partial index 0 for j = 0 and NUM_SPLITS + j after (the
    page splits keep 1 .. NUM_SPLITS). With WRITE_NEW the program holding the newest position writes the query
    token's own K/V there first. Strides in elements of the ring (hvw_ptr: the value ring read as int32 words)."""
    dt: gl.constexpr = hk_ptr.dtype.element_ty
    slot = gl.load(hslot_ptr + b).to(gl.int64)
    start = gl.load(hstart_ptr + b)
    hlen = gl.load(hlen_ptr + b)
    hs = slot * s_hs + h.to(gl.int64) * s_hh
    t_lo = j * HOT_TOKENS
    t_hi = gl.minimum(hlen, t_lo + HOT_TOKENS)
    if WRITE_NEW:
        if (hlen - 1) // HOT_TOKENS == j:  # the only reader of this ring row in the launch
            L1: gl.constexpr = gl.BlockedLayout(size_per_thread=[4], threads_per_warp=[32], warps_per_cta=[1],
                                                order=[0])
            c = gl.arange(0, 128, layout=L1)
            dst = _ring_rows(hs, start + hlen - 1, s_hr, s_hn, P) + c
            src = b.to(gl.int64) * s_nb + h.to(gl.int64) * s_nh + c
            gl.store(hk_ptr + dst, gl.load(nk_ptr + src).to(dt))
            gl.store(hv_ptr + dst, gl.load(nv_ptr + src).to(dt))
        cta_barrier()  # the warp's stores visible to its loads below

    # q^T [128, 8] in the ring's dtype, unscaled (the products are scaled in fp32, as HOT_NATIVE does); heads >= G: 0
    qk = gl.arange(0, 128, layout=gl.SliceLayout(1, OPB))
    qn = gl.arange(0, 8, layout=gl.SliceLayout(0, OPB))
    q_at = q_ptr + b.to(gl.int64) * s_qb + (h * G + qn).to(gl.int64)[None, :] * s_qh + qk[:, None]
    q_b = gl.load(q_at, mask=(qn < G)[None, :], other=0.0).to(dt)

    kt = gl.arange(0, 32, layout=gl.SliceLayout(1, OPA))  # K [32 tokens, 128 channels]
    kc = gl.arange(0, 128, layout=gl.SliceLayout(0, OPA))
    vt = gl.arange(0, 32, layout=gl.SliceLayout(1, _VW))  # value words [32 tokens, 64]
    vw = gl.arange(0, 64, layout=gl.SliceLayout(0, _VW))
    st = gl.arange(0, 32, layout=gl.SliceLayout(1, MMA))  # S^T's token rows
    m_i = gl.full([8], float("-inf"), gl.float32, layout=gl.SliceLayout(0, MMA))
    l_i = gl.zeros([8], gl.float32, layout=gl.SliceLayout(0, MMA))
    o_i = gl.zeros([128, 8], gl.float32, layout=MMA)
    zero_s = gl.zeros([32, 8], gl.float32, layout=MMA)
    for t0 in range(t_lo, t_hi, 32):
        k_at = _ring_rows(hs, start + t0 + kt, s_hr, s_hn, P)
        kk = gl.load(hk_ptr + k_at[:, None] + kc[None, :], mask=(t0 + kt < t_hi)[:, None], other=0.0)
        v_at = _ring_rows(hs, start + t0 + vt, s_hr, s_hn, P) // 2  # in 32-bit words
        words = gl.load(hvw_ptr + v_at[:, None] + vw[None, :], mask=(t0 + vt < t_hi)[:, None], other=0)
        sc = mma_v2(kk, q_b, zero_s) * qk_scale
        sc = gl.where((t0 + st < t_hi)[:, None], sc, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(sc, 0))
        alpha = gl.exp2(m_i - m_new)
        p = gl.exp2(sc - m_new[None, :])
        l_i = l_i * alpha + gl.sum(p, 0)
        o_i = mma_v2(_values_t(words, OPA, dt), gl.convert_layout(p.to(dt), OPB), o_i * alpha[None, :])
        m_i = m_new

    oc = gl.arange(0, 128, layout=gl.SliceLayout(1, MMA))
    on = gl.arange(0, 8, layout=gl.SliceLayout(0, MMA))
    prow = (b * (HKV * G) + h * G + on).to(gl.int64) * NPART + gl.where(j > 0, NUM_SPLITS + j, 0)
    gl.store(acc_ptr + prow[None, :] * 128 + _hot_channel(oc)[:, None], o_i, mask=(on < G)[None, :])
    gl.store(m_ptr + prow, m_i, mask=on < G)
    gl.store(l_ptr + prow, l_i, mask=on < G)
