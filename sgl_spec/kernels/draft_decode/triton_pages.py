"""Stage 1 of the Triton ``draft_decode`` (sgl_spec/kernels/draft_decode/triton.py launches it, with the merge of
sgl_spec/kernels/draft_decode/merge.py as stage 2): the hot-token program and the page splits, each writing (m, l, unnormalized acc)
per query head.

Design (bandwidth bound: a draft step streams ~4.3 bits/element of K and V and nothing else; docs/KERNELS.md):

* Stage 1, grid ``(B, Hkv, 1 + NUM_SPLITS)``. A program serves the ``G = Hq/Hkv`` query heads of one KV head (padded
  to GPAD >= 16 for ``tl.dot``), so every page byte is read once per KV head, not once per query head.
  Program ``s == 0`` attends to the hot tokens only (<= 2 ring pages in the model dtype; sgl_spec/kernels/draft_decode/triton_hot.py), so it
  runs beside the page splits instead of lengthening one of them; it comes first in launch order so it never forms a
  tail.
  Programs ``s >= 1`` take a contiguous share ``cdiv(num_pages[b], NUM_SPLITS)`` of the request's page list, one page
  (P tokens) per iteration. For P <= 64 the next page's loads are issued into registers before the current page is
  computed (PREFETCH): Triton's own pipeliner, given the page-id load that addresses the tiles, waits for all
  outstanding cp.async copies every iteration, which serialized memory latency and compute.
* Everything is transposed so the page's tokens are the MMA's M dimension (wgmma: M = 64 per warpgroup):
  ``scores^T [P, GPAD] = K [P, C] q^T [C, GPAD]`` and ``out^T [C, GPAD] += U_v^T [C, P] (p∘s_v)^T [P, GPAD]``.
  Keys are dequantized to fp16 in registers (``u s + z``, one fused f16x2 FMA per pair, one rounding), so q^T is a
  constant shared-memory operand for every page (no per-page q∘s, no per-page q·z reduction). Values keep exact
  centred codes ``u - 8``: the per-token scale folds into p and ``Σ_n p_n (z_n + 8 s_n)`` is added per row at the end.
* Byte ``j`` of a packed row holds channel ``j`` (low nibble) and ``j + D/2`` (high nibble), so one tile gives the two
  contiguous halves of the head dim; q and the accumulators are kept as (lo, hi) halves. The high nibble is used as
  ``16 u`` (masked, not shifted); its 1/16 goes into the key scale / the final value accumulator (exact).
* The planes are read as int32 words and converted by inline PTX (``_ASM_KEYS`` / ``_ASM_VALUES``: PRMT + LOP3
  magic-number conversion to fp16 pairs, ~10-14 instructions per 8 nibbles); the interpreter runs an equivalent
  integer path. Integer->float conversion instructions run at 1/4 rate on Hopper and would rival the memory time.
* Online softmax in fp32, base 2 (sm_scale·log2 e folded into q). The row sums (l and the value zero term) are
  accumulated per (token, head) and reduced once after the loop, leaving one reduction per page (the max).
  Each stage-1 program writes (m, l, unnormalized acc) per query head; stage 2 (one program per query head) merges
  the 1 + NUM_SPLITS partials (merging in the last stage-1 program of each (request, KV head), found by a counter,
  saves the launch but is slower on an H200).
"""
import triton
import triton.language as tl

from sgl_spec.kernels.draft_decode.triton_hot import _attend_hot
from sgl_spec.kernels.draft_decode.merge import _store_partial
from sgl_spec.kernels.common.nibble_words import _div16, _key_frag, _keys_f16, _tok_perm, _values_f16, key_frag_channels
from sgl_spec.kernels.common.pdl import _release_dependents, _wait_prior


# nibble -> fp16 conversion (inline PTX / interpreter path): sgl_spec/kernels/common/nibble_words.py


@triton.jit
def _load_page(ku_ptr, vu_ptr, s_up, s_uh, ks_ptr, kz_ptr, s_ksp, s_ksh, vs_ptr, vz_ptr, s_vsp, s_vsh,
               page, ok, h, offs_n, offs_w, w_ok, W: tl.constexpr, FLAT_SCALES: tl.constexpr):
    """One page's draft tiles for KV head h: (key words, value words) [P, BLOCK_W] int32, the key scales/zeros, the
    value scales/zeros fp16 [P]. Key scales/zeros: a tuple of int32 fp16-pair tiles [BLOCK_W, 2] (s_lo, s_hi, z_lo,
    z_hi) loaded in the layout the conversion uses (each thread its own copy of its words' channels: 16 LDG.64 a
    page for D = 128), or with FLAT_SCALES one flat int32 vector [8 BLOCK_W] (one word a thread for D = 128, no
    copies; ``_key_tiles`` redistributes it, through shared memory, when the page is computed)."""
    pg = page.to(tl.int64)
    tile = pg * s_up + h * s_uh + offs_n[:, None].to(tl.int64) * W + offs_w[None, :]
    m2 = ok & w_ok[None, :]
    kw = tl.load(ku_ptr + tile, mask=m2, other=0, cache_modifier=".cg")
    vw = tl.load(vu_ptr + tile, mask=m2, other=0, cache_modifier=".cg")
    # k_scale / k_zero as int32 words (2 channels each): word 2w + t holds channels 4w + 2t, 4w + 2t + 1
    base = pg * s_ksp + h * s_ksh
    if FLAT_SCALES:
        BW: tl.constexpr = offs_w.shape[0]
        f = tl.arange(0, 8 * BW)  # f = ((kind * 2 + half) * BW + w) * 2 + t; kind 0: scales, 1: zeros
        w = (f // 2) % BW
        at = base + ((f // (2 * BW)) % 2) * (2 * W) + 2 * w + f % 2
        ptr = tl.where(f < 4 * BW, ks_ptr + at, kz_ptr + at)
        ksc = tl.load(ptr, mask=ok & (w < W), other=0, eviction_policy="evict_first")
    else:
        pair = base + 2 * offs_w[:, None] + tl.arange(0, 2)[None, :]
        m1 = ok & w_ok[:, None]
        ksc = (tl.load(ks_ptr + pair, mask=m1, other=0, eviction_policy="evict_first"),
               tl.load(ks_ptr + pair + W * 2, mask=m1, other=0, eviction_policy="evict_first"),
               tl.load(kz_ptr + pair, mask=m1, other=0, eviction_policy="evict_first"),
               tl.load(kz_ptr + pair + W * 2, mask=m1, other=0, eviction_policy="evict_first"))
    vrow = pg * s_vsp + h * s_vsh + offs_n
    vsc = tl.load(vs_ptr + vrow, mask=ok, other=0.0, eviction_policy="evict_first")
    vzr = tl.load(vz_ptr + vrow, mask=ok, other=0.0, eviction_policy="evict_first")
    return kw, vw, ksc, vsc, vzr


@triton.jit
def _key_tiles(ksc, BW: tl.constexpr, FLAT_SCALES: tl.constexpr):
    """(s_lo, s_hi, z_lo, z_hi) int32 fp16-pair tiles [BW, 2] from ``_load_page``'s key scales/zeros."""
    if FLAT_SCALES:
        x = tl.permute(tl.reshape(ksc, (2, 2, BW, 2)), (2, 3, 1, 0))  # [w, t, half, kind]
        sc, zr = tl.split(x)
        s_lo, s_hi = tl.split(sc)
        z_lo, z_hi = tl.split(zr)
        return s_lo, s_hi, z_lo, z_hi
    else:
        return ksc


@triton.jit
def _attend_page(m_i, l_t, z_t, acc_lo, acc_hi, q_lo, q_hi, page, BW: tl.constexpr, FLAT_SCALES: tl.constexpr,
                 USE_ASM: tl.constexpr, KF: tl.constexpr = False):
    """Online-softmax update with one quantized page (``_load_page``'s tuple), transposed so the page's P tokens are
    the MMA's M dimension (wgmma: M = 64 per warpgroup): scores^T [P, GPAD] = K [P, C] q^T [C, GPAD] with the keys
    dequantized to fp16 in registers (so q^T is one constant shared-memory operand), out^T [C, GPAD] += U_v^T [C, P]
    (p∘s_v)^T [P, GPAD]. Scores in log2 units; l_t / z_t are the per-(token, head) running sums of p and p * (value
    zero term); acc_hi holds 16x the high channels. KF: keys in the wgmma A fragment's channel / token order
    (nibble_words._key_frag; q^T loaded to match), values and value scales in the same token order."""
    kw, vw, ksc, vsc, vzr = page
    ks_lo, ks_hi, kz_lo, kz_hi = _key_tiles(ksc, BW, FLAT_SCALES)
    k_lo, k_hi = _keys_f16(kw, ks_lo, kz_lo, _div16(ks_hi, USE_ASM), kz_hi, USE_ASM)
    if KF:
        k_lo = _key_frag(k_lo)
        k_hi = _key_frag(k_hi)
        vsc = _tok_perm(vsc)
        vzr = _tok_perm(vzr)
    sc = tl.dot(k_lo, q_lo)
    sc = tl.dot(k_hi, q_hi, sc)  # [P, GPAD]
    m_new = tl.maximum(m_i, tl.max(sc, 0))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(sc - m_new[None, :])
    vs = vsc.to(tl.float32)
    l_t = l_t * alpha[None, :] + p
    z_t = z_t * alpha[None, :] + p * (vzr.to(tl.float32) + 8.0 * vs)[:, None]
    ps = (p * vs[:, None]).to(tl.float16)  # [P, GPAD]
    v_lo, v_hi = _values_f16(vw, USE_ASM)
    if KF:
        v_lo = _tok_perm(v_lo)
        v_hi = _tok_perm(v_hi)
    acc_lo = tl.dot(tl.trans(v_lo), ps, acc_lo * alpha[None, :])  # [BLOCK_C, GPAD]
    acc_hi = tl.dot(tl.trans(v_hi), ps, acc_hi * alpha[None, :])
    return m_new, l_t, z_t, acc_lo, acc_hi


# NUM_SPLITS follows the batch (launch.py num_splits_for: up to ~20 values over a server's batch sizes): a runtime
# argument, so eager drafts run one compiled variant for every batch size instead of compiling one a split count
@triton.jit(do_not_specialize=["NUM_SPLITS"])
def _draft_decode_kernel(
    q_ptr, s_qb, s_qh,
    ku_ptr, vu_ptr, s_up, s_uh,
    ks_ptr, kz_ptr, s_ksp, s_ksh,
    vs_ptr, vz_ptr, s_vsp, s_vsh,
    pid_ptr, s_pb, s_ph, np_ptr, MAXP,
    hk_ptr, hv_ptr, s_hs, s_hr, s_hn, s_hh,
    hslot_ptr, hstart_ptr, hlen_ptr,
    nk_ptr, nv_ptr, s_nb, s_nh,
    m_ptr, l_ptr, acc_ptr,
    qk_scale,
    G: tl.constexpr, GPAD: tl.constexpr, HALF: tl.constexpr, BLOCK_C: tl.constexpr, P: tl.constexpr,
    NUM_SPLITS, HOT_PREC: tl.constexpr, HOT_BLOCK: tl.constexpr, USE_ASM: tl.constexpr,
    PREFETCH: tl.constexpr, FLAT_SCALES: tl.constexpr = False, KF: tl.constexpr = False,
    WRITE_NEW: tl.constexpr = False, PDL: tl.constexpr = False, HOT_NATIVE: tl.constexpr = False,
    EARLY_LAUNCH: tl.constexpr = False, HOT_LAST: tl.constexpr = False,
):
    if not HOT_LAST:
        _wait_prior(PDL)
        _release_dependents(EARLY_LAUNCH)  # engine="gluon": the page launch that follows reads nothing this one writes
    # HOT_LAST (engine="gluon", launch.gluon_hot_last): this launch follows the page launch, which waited for the
    # stream and then let this one start; it writes nothing the page launch reads, and waits for it at its end (below)
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
        m_i, l_i, acc_lo, acc_hi = _attend_hot(
            b, h, q_row, offs_c, c_ok, g_ok, m_i, l_i, acc_lo, acc_hi,
            hk_ptr, hv_ptr, s_hs, s_hr, s_hn, s_hh, hslot_ptr, hstart_ptr, hlen_ptr, nk_ptr, nv_ptr, s_nb, s_nh,
            qk_scale, HALF, P, HOT_PREC, HOT_BLOCK, HOT_NATIVE, WRITE_NEW)
        _store_partial(m_ptr, l_ptr, acc_ptr, prow, g_ok, offs_c, c_ok, m_i, l_i, acc_lo, acc_hi, HALF)
    else:
        # ---- this split's contiguous share of the page list
        n = tl.minimum(tl.maximum(tl.load(np_ptr + b), 0), MAXP)
        per = (n + NUM_SPLITS - 1) // NUM_SPLITS
        lo = tl.minimum((s - 1) * per, n)
        hi = tl.minimum(lo + per, n)
        ids = pid_ptr + b.to(tl.int64) * s_pb + h.to(tl.int64) * s_ph  # s_ph = 0: one list for all heads
        offs_w = tl.arange(0, BLOCK_C // 4)
        w_ok = offs_w < HALF // 4
        # q^T [BLOCK_C, GPAD] halves in log2 units, fp16 (the keys are dequantized: one operand for every page)
        qt_at = q_row[None, :] + (key_frag_channels(BLOCK_C) if KF else offs_c)[:, None]  # KF: the keys' order
        qt_ok = g_ok[None, :] & c_ok[:, None]
        qt_lo = (tl.load(qt_at, mask=qt_ok, other=0.0).to(tl.float32) * qk_scale).to(tl.float16)
        qt_hi = (tl.load(qt_at + HALF, mask=qt_ok, other=0.0).to(tl.float32) * qk_scale).to(tl.float16)
        l_t = tl.zeros([P, GPAD], tl.float32)
        z_t = tl.zeros([P, GPAD], tl.float32)
        at_lo = tl.zeros([BLOCK_C, GPAD], tl.float32)
        at_hi = tl.zeros([BLOCK_C, GPAD], tl.float32)
        m_t = tl.full([GPAD], float("-inf"), tl.float32)
        BW: tl.constexpr = BLOCK_C // 4
        if PREFETCH:
            # Register prefetch by hand (launched with num_stages=1): the loads of page i+1 are issued before page i
            # is computed, so a page's memory latency overlaps the work of the page before it. (Triton's own
            # pipeliner turns the page-id load that addresses the tiles into a cp.async and then waits for *all*
            # outstanding copies every iteration: no overlap at all.) Two pages in flight are no faster.
            cur = _load_page(ku_ptr, vu_ptr, s_up, s_uh, ks_ptr, kz_ptr, s_ksp, s_ksh, vs_ptr, vz_ptr, s_vsp, s_vsh,
                             tl.load(ids + lo, mask=lo < hi, other=0), lo < hi, h, offs_n, offs_w, w_ok, HALF // 4,
                             FLAT_SCALES)
            pg_next = tl.load(ids + lo + 1, mask=lo + 1 < hi, other=0)
            for i in range(lo, hi):
                nxt = _load_page(ku_ptr, vu_ptr, s_up, s_uh, ks_ptr, kz_ptr, s_ksp, s_ksh, vs_ptr, vz_ptr, s_vsp,
                                 s_vsh, pg_next, i + 1 < hi, h, offs_n, offs_w, w_ok, HALF // 4, FLAT_SCALES)
                pg_next = tl.load(ids + i + 2, mask=i + 2 < hi, other=0)
                m_t, l_t, z_t, at_lo, at_hi = _attend_page(m_t, l_t, z_t, at_lo, at_hi, qt_lo, qt_hi, cur, BW,
                                                           FLAT_SCALES, USE_ASM, KF)
                cur = nxt
        else:
            for i in range(lo, hi):
                cur = _load_page(ku_ptr, vu_ptr, s_up, s_uh, ks_ptr, kz_ptr, s_ksp, s_ksh, vs_ptr, vz_ptr, s_vsp,
                                 s_vsh, tl.load(ids + i), i < hi, h, offs_n, offs_w, w_ok, HALF // 4, FLAT_SCALES)
                m_t, l_t, z_t, at_lo, at_hi = _attend_page(m_t, l_t, z_t, at_lo, at_hi, qt_lo, qt_hi, cur, BW,
                                                           FLAT_SCALES, USE_ASM, KF)
        l_i = tl.sum(l_t, 0)
        z_i = tl.sum(z_t, 0)
        acc_lo = tl.trans(at_lo + z_i[None, :])
        acc_hi = tl.trans(at_hi * 0.0625 + z_i[None, :])
        _store_partial(m_ptr, l_ptr, acc_ptr, prow, g_ok, offs_c, c_ok, m_t, l_i, acc_lo, acc_hi, HALF)
    if HOT_LAST:  # the merge after this launch waits for it alone: finish only after the page launch
        _wait_prior(PDL)
