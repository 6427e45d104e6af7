"""Gluon page programs for ``draft_decode`` (``engine="gluon"``; P = 64 or 128, head_dim 128, G <= 8, sm_90+, Triton
3.6; the server's default where it runs: ``--quantspec-draft-kernel auto``, sgl_spec/kernels/engine.py
``select_engine``). A 128-token page runs as two 64-token sub-pages (``SUB`` = 2, ``_sub_page``): the same tile,
the list twice as long.

Why a second form of the page loop: the Triton kernel spends ~2200 warp-instructions and 9 CTA barriers a (page, KV
head) on a 4-warp wgmma tile, most of them layout conversions through shared memory that Triton's layouts do not let
us remove. Here **one warp owns a page** and every operand is built in registers in the exact layout
``mma.sync.m16n8k16`` reads (Gluon's explicit layouts make the conversions register renames, checked at compile time
with ``assert_trivial``), so there is no shared memory, no barrier and no cross-warp reduction:

* tokens as the MMA's M: scores ``S^T [64, 8] = K [64, 128] q^T [128, 8]`` (q^T, N = 8 query heads with G <= 8,
  is a constant register operand), ``O^T [128, 8] = V^T [128, 64] (p∘s_v) [64, 8]``; only P^T changes layout
  (register shuffles), where scores ``q K^T`` with the heads padded to M = 16 would spend ~250 moves a page;
* keys: a lane loads 4 consecutive words (LDG.128) of 8 tokens; one asm block a word (common/nibble_words.py's
  ``_ASM_KEYS``) gives 4 dequantized fp16 pairs; the channel order of the MMA's k index is free (q is loaded in the
  same order, ``_key_channel``), so the pairs land in the A fragment as converted;
* values: a lane loads 2 consecutive words (LDG.64) of 16 tokens; one asm block a token pair (``_ASM_VPAIR``) makes
  8 fp16 pairs (token 2t, token 2t+1) of one channel each: the A fragment of V^T. Codes stay ``1024 + u`` /
  ``1024 + 16 u`` (exact fp16); the per-token scale folds into p (``p' = p s`` rounded to fp16, as the Triton
  kernel does) and the offsets leave per page (``_attend``): ``o = Σ_pages (acc - 1024 Σp')`` (the high half's
  1/16 at the end) ``+ Σ p z``, with Σp' summed over the same fp16 p' the MMA used;
* online softmax in fp32, base 2, over the page's 64 tokens per head;
* split s takes pages s, s + NUM_SPLITS, ...: its first page id is loaded beside the page count, not after it.

``STAGES`` > 0 (launch.gluon_stream_stages): the pages stream through a ring of that many slots in shared memory
instead (gluon_stream.py), the same words landing in the same registers, with two warp barriers a page; the copies
are TMA (``TMA``: one lane, an mbarrier a slot) where the tensors can be addressed as TMA rows, else every lane's
cp.async.

A program is one warp and one split of one (request, KV head); it writes the same partial (m, l, unnormalized acc) as
the Triton page programs, at partial index 1 + split, so the Triton hot-token program (index 0) and the Triton
merge are reused unchanged. With ``HS`` > 0 the launch holds the hot-token programs too (gluon_hot.py, programs
NUM_SPLITS .. + HS - 1 of each (request, KV head), partials 0 and NUM_SPLITS + 1 ..): no hot-token launch before it.
Otherwise the Triton hot-token launch runs before this one (it lets this one start at once; the page programs wait
for it at their end) or, with ``HOT_LAST``, after it (this launch waits for the stream at its start and lets the
hot-token launch start at once; that launch waits for this one at its end): launch.gluon_hot_last.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy, mma_v2
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier

from sgl_spec.kernels.common.gluon_compat import cta_barrier
from sgl_spec.kernels.draft_decode.gluon_hot import _half_pair, _hot_partial
from sgl_spec.kernels.draft_decode.gluon_stream import (_copy_page, _page_words, _read_page, _stream_buffers, _tma_buffers,
                                                 _tma_page)
from sgl_spec.kernels.common.nibble_words import _ASM_KEYS

# values: a token pair (even word $8, odd word $9, the same 4 channels + their D/2 partners) -> 8 fp16 pairs
# (even token, odd token) of one channel each: $0..$3 low nibbles of bytes 0..3 (1024 + u), $4..$7 high nibbles
# (1024 + 16 u). 2 PRMT + 2 SHR + 8 LOP3 for 16 nibbles.
_ASM_VPAIR = gl.constexpr("""{
.reg .b32 x, y, xs, ys;
prmt.b32 x, $8, $9, 0x5410;
prmt.b32 y, $8, $9, 0x7632;
shr.b32 xs, x, 8;
shr.b32 ys, y, 8;
lop3.b32 $0, x, 0x000F000F, 0x64006400, 0xEA;
lop3.b32 $1, xs, 0x000F000F, 0x64006400, 0xEA;
lop3.b32 $2, y, 0x000F000F, 0x64006400, 0xEA;
lop3.b32 $3, ys, 0x000F000F, 0x64006400, 0xEA;
lop3.b32 $4, x, 0x00F000F0, 0x64006400, 0xEA;
lop3.b32 $5, xs, 0x00F000F0, 0x64006400, 0xEA;
lop3.b32 $6, y, 0x00F000F0, 0x64006400, 0xEA;
lop3.b32 $7, ys, 0x00F000F0, 0x64006400, 0xEA;
}""")
_DIV16 = gl.constexpr("{.reg .b32 c; mov.b32 c, 0x2C002C00; mul.rn.f16x2 $0, $1, c;}")


@gluon.jit
def _f16_pair(x):
    """int32 holding two fp16 (bits 0-15, 16-31) -> fp16 [..., 2] (a register rename)."""
    return _half_pair(x, gl.float16)


@gluon.jit
def _key_channel(k):
    """Head-dim channel held at index k of the MMA's reduction dim for keys (and q): k = 64 w1 + 32 w0 + 16 h +
    8 p + 4 w3 + 2 w2 + e for word w = 8 w3 + 4 w2 + 2 w1 + w0, pair p of the word's low (h = 0) or high half, e
    the pair element (``_keys_a``'s permutation)."""
    w = 8 * ((k >> 2) & 1) + 4 * ((k >> 1) & 1) + 2 * ((k >> 6) & 1) + ((k >> 5) & 1)
    return 64 * ((k >> 4) & 1) + 4 * w + 2 * ((k >> 3) & 1) + (k & 1)


@gluon.jit
def _value_channel(n):
    """Head-dim channel held at column n of the value operand / output: n = 64 h + 32 i1 + 16 i0 + 8 w0 + 4 w3 +
    2 w2 + w1 (``_values_a``'s permutation); channel 64 h + 4 w + 2 i1 + i0."""
    w = 8 * ((n >> 2) & 1) + 4 * ((n >> 1) & 1) + 2 * (n & 1) + ((n >> 3) & 1)
    return 64 * ((n >> 6) & 1) + 4 * w + 2 * ((n >> 5) & 1) + ((n >> 4) & 1)


@gluon.jit
def _keys_a(kw, s_lo, z_lo, s_hi, z_hi, OP: gl.constexpr):
    """Key words [64 tokens, 16] (layout KW) + scale/zero pair words [32] (2 w + j: pair j of word w) -> dequantized
    K [64 tokens, 128] fp16 in the A fragment layout (channels in ``_key_channel`` order)."""
    sl01, sl23 = gl.split(gl.reshape(s_lo, [16, 2]))
    zl01, zl23 = gl.split(gl.reshape(z_lo, [16, 2]))
    sh01, sh23 = gl.split(gl.reshape(s_hi, [16, 2]))
    zh01, zh23 = gl.split(gl.reshape(z_hi, [16, 2]))
    SL: gl.constexpr = gl.SliceLayout(0, kw.type.layout)
    o0, o1, o2, o3 = gl.inline_asm_elementwise(
        _ASM_KEYS, "=r,=r,=r,=r,r,r,r,r,r,r,r,r,r",
        [kw, gl.convert_layout(sl01, SL)[None, :], gl.convert_layout(sl23, SL)[None, :],
         gl.convert_layout(zl01, SL)[None, :], gl.convert_layout(zl23, SL)[None, :],
         gl.convert_layout(sh01, SL)[None, :], gl.convert_layout(sh23, SL)[None, :],
         gl.convert_layout(zh01, SL)[None, :], gl.convert_layout(zh23, SL)[None, :]],
        dtype=(gl.int32, gl.int32, gl.int32, gl.int32), is_pure=True, pack=1)
    t = gl.join(gl.join(_f16_pair(o0), _f16_pair(o1)), gl.join(_f16_pair(o2), _f16_pair(o3)))  # [64,16,e,p,h]
    t = gl.reshape(t, [64, 2, 2, 2, 2, 2, 2, 2])  # tok, w3, w2, w1, w0, e, p, h
    t = gl.permute(t, [0, 3, 4, 7, 6, 1, 2, 5])  # tok, w1, w0, h, p, w3, w2, e
    return gl.convert_layout(gl.reshape(t, [64, 128]), OP, assert_trivial=True)


@gluon.jit
def _values_a(vw, OP: gl.constexpr):
    """Value words [64 tokens, 16] (layout VW) -> V^T [128, 64 tokens] fp16 codes (1024 + u, 1024 + 16 u) in the A
    fragment layout, channels (rows) in ``_value_channel`` order."""
    ve, vo = gl.split(gl.permute(gl.reshape(vw, [32, 2, 16]), [0, 2, 1]))
    o0, o1, o2, o3, o4, o5, o6, o7 = gl.inline_asm_elementwise(
        _ASM_VPAIR, "=r,=r,=r,=r,=r,=r,=r,=r,r,r", [ve, vo], dtype=(gl.int32,) * 8, is_pure=True, pack=1)
    lo = gl.join(gl.join(_f16_pair(o0), _f16_pair(o1)), gl.join(_f16_pair(o2), _f16_pair(o3)))  # [32,16,e,i0,i1]
    hi = gl.join(gl.join(_f16_pair(o4), _f16_pair(o5)), gl.join(_f16_pair(o6), _f16_pair(o7)))
    t = gl.reshape(gl.join(lo, hi), [32, 2, 2, 2, 2, 2, 2, 2, 2])  # t, w3, w2, w1, w0, e, i0, i1, h
    t = gl.permute(t, [0, 5, 8, 7, 6, 4, 1, 2, 3])  # t, e, h, i1, i0, w0, w3, w2, w1
    return gl.convert_layout(gl.permute(gl.reshape(t, [64, 128]), [1, 0]), OP, assert_trivial=True)


@gluon.jit
def _sub_page(i, ids, mask, SUB: gl.constexpr):
    """The page id and half of list position ``i`` counted in 64-token sub-pages (SUB = P / 64): a 128-token page is
    two sub-pages that share its key scales (keys are grouped per channel over the whole page), its words and value
    scales split at token 64 (the planes are token-major, ``sgl_spec/kvcache/format.py``)."""
    if SUB == 1:
        return gl.load(ids + i, mask=mask, other=0), 0
    else:
        return gl.load(ids + i // SUB, mask=mask, other=0), i % SUB


@gluon.jit
def _load_page(ku_ptr, vu_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr, s_up, s_uh, s_ksp, s_ksh, s_vsp, s_vsh, page, h, ok,
               KW: gl.constexpr, VW: gl.constexpr, KSC: gl.constexpr, VSL: gl.constexpr, half=0):
    """One 64-token (sub-)page's words, key scale/zero pair words and value scales/zeros for KV head h (masked by
    ok); ``half``: which 64 tokens of a 128-token page (0 at P = 64)."""
    pg = page.to(gl.int64)
    kp, vp = _page_words(ku_ptr, vu_ptr, s_up, s_uh, pg, h, half, KW, VW)
    kw = gl.load(kp, mask=ok, other=0, cache_modifier=".cg")
    vw = gl.load(vp, mask=ok, other=0, cache_modifier=".cg")
    so = pg * s_ksp + h * s_ksh + gl.arange(0, 32, layout=KSC)
    s_lo = gl.load(ks_ptr + so, mask=ok, other=0, eviction_policy="evict_first")
    s_hi = gl.load(ks_ptr + so + 32, mask=ok, other=0, eviction_policy="evict_first")
    z_lo = gl.load(kz_ptr + so, mask=ok, other=0, eviction_policy="evict_first")
    z_hi = gl.load(kz_ptr + so + 32, mask=ok, other=0, eviction_policy="evict_first")
    tv = gl.arange(0, 64, layout=VSL)
    vo = pg * s_vsp + h * s_vsh + half * 64 + tv
    vs = gl.load(vs_ptr + vo, mask=ok, other=0.0, eviction_policy="evict_first")
    vz = gl.load(vz_ptr + vo, mask=ok, other=0.0, eviction_policy="evict_first")
    return kw, vw, s_lo, s_hi, z_lo, z_hi, vs, vz


@gluon.jit
def _attend(m_i, l_i, pz_i, o_i, q_b, page, zero_s, zero_o, MMA: gl.constexpr, OPA: gl.constexpr,
            OPB: gl.constexpr):
    """Online-softmax update with one page, transposed (tokens as the MMA's M): S^T [64, 8] = K [64, 128] q^T
    [128, 8] (N = 8 query heads: no padded rows to copy around), O^T [128, 8] = V^T [128, 64] (p∘s_v) [64, 8].
    The page's P·V runs on a zero accumulator and its code offset (1024 Σp', the high half's 1/16 comes at the end)
    is removed before it joins the running sum: accumulated across pages in the MMA the offset grows to ~1000x the
    signal and the tensor cores' truncating fp32 adds lose ~5% over 64 pages."""
    kw, vw, s_lo, s_hi, z_lo, z_hi, vs, vz = page
    s_hi = gl.inline_asm_elementwise(_DIV16, "=r,r", [s_hi], dtype=gl.int32, is_pure=True, pack=1)
    sc = mma_v2(_keys_a(kw, s_lo, z_lo, s_hi, z_hi, OPA), q_b, zero_s)  # [64 tokens, 8 heads]
    m_new = gl.maximum(m_i, gl.max(sc, 0))
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(sc - m_new[None, :])
    p16 = (p * vs.to(gl.float32)[:, None]).to(gl.float16)
    l_i = l_i * alpha + gl.sum(p, 0)
    pz_i = pz_i * alpha + gl.sum(p * vz.to(gl.float32)[:, None], 0)
    ps = gl.sum(p16.to(gl.float32), 0)
    o_pg = mma_v2(_values_a(vw, OPA), gl.convert_layout(p16, OPB), zero_o)  # [128 channels, 8 heads]
    o_i = o_i * alpha[None, :] + (o_pg - 1024.0 * ps[None, :])
    return m_new, l_i, pz_i, o_i


@gluon.jit
def _draft_pages_kernel(
    q_ptr, s_qb, s_qh,
    ku_ptr, vu_ptr, s_up, s_uh,
    ks_ptr, kz_ptr, s_ksp, s_ksh,
    vs_ptr, vz_ptr, s_vsp, s_vsh,
    pid_ptr, s_pb, s_ph, np_ptr, MAXP,
    m_ptr, l_ptr, acc_ptr,
    qk_scale, HKV,
    G: gl.constexpr, NUM_SPLITS: gl.constexpr, PDL: gl.constexpr = False, NPAGES=1, SUB: gl.constexpr = 1,
    hk_ptr=None, hv_ptr=None, hvw_ptr=None, s_hs=0, s_hr=0, s_hn=0, s_hh=0, hslot_ptr=None, hstart_ptr=None,
    hlen_ptr=None, nk_ptr=None, nv_ptr=None, s_nb=0, s_nh=0, HS: gl.constexpr = 0, WRITE_NEW: gl.constexpr = False,
    STAGES: gl.constexpr = 0, kud=None, vud=None, ksd=None, kzd=None, vsd=None, vzd=None, rk_p=0, rk_h=0, rs_p=0,
    rs_h=0, rv_p=0, rv_h=0, TMA: gl.constexpr = False, HOT_LAST: gl.constexpr = False,
):
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[1, 1], instr_shape=[16, 8])
    OPA: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    OPB: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MMA, k_width=2)
    # partials: hot-token program 0 | page splits 1 .. NUM_SPLITS | hot-token programs 1 .. HS - 1 (HS = 0: the hot
    # tokens are a Triton launch's, at index 0)
    NPART: gl.constexpr = NUM_SPLITS + (HS if HS > 0 else 1)
    if PDL and (HS > 0 or HOT_LAST):  # the launch's first kernel: wait for the stream (q, the ring) before any load
        gl.inline_asm_elementwise("griddepcontrol.wait; // dummy $0", "=r", [], dtype=gl.int32, is_pure=False,
                                  pack=1)
    if PDL and HOT_LAST:  # the hot-token launch follows this one: let its programs start in this launch's tail
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // dummy $0", "=r", [], dtype=gl.int32,
                                  is_pure=False, pack=1)
    s = gl.program_id(0)
    bh = gl.program_id(1)
    b = bh // HKV
    h = bh % HKV
    # two calls of the page code on purpose: with HS = 0 it stays outside any branch (one condition
    # ``if HS == 0 or s < NUM_SPLITS`` makes ptxas place the page loop's loads differently)
    if HS > 0:  # programs NUM_SPLITS .. + HS - 1 of each (request, KV head): the hot tokens (draft_hot_gluon.py)
        if s >= NUM_SPLITS:
            _hot_partial(q_ptr, s_qb, s_qh, hk_ptr, hv_ptr, hvw_ptr, s_hs, s_hr, s_hn, s_hh, hslot_ptr, hstart_ptr,
                         hlen_ptr, nk_ptr, nv_ptr, s_nb, s_nh, m_ptr, l_ptr, acc_ptr, b, h, s - NUM_SPLITS, HKV,
                         qk_scale, G, NPART, NUM_SPLITS, 64 * SUB, WRITE_NEW, MMA, OPA, OPB)
        else:
            _split_partial(q_ptr, s_qb, s_qh, ku_ptr, vu_ptr, s_up, s_uh, ks_ptr, kz_ptr, s_ksp, s_ksh, vs_ptr,
                           vz_ptr, s_vsp, s_vsh, pid_ptr, s_pb, s_ph, np_ptr, MAXP, m_ptr, l_ptr, acc_ptr, qk_scale,
                           HKV, s, b, h, G, NUM_SPLITS, NPART, NPAGES, SUB, MMA, OPA, OPB, STAGES,
                           (kud, vud, ksd, kzd, vsd, vzd), (rk_p, rk_h, rs_p, rs_h, rv_p, rv_h), TMA)
    else:
        _split_partial(q_ptr, s_qb, s_qh, ku_ptr, vu_ptr, s_up, s_uh, ks_ptr, kz_ptr, s_ksp, s_ksh, vs_ptr, vz_ptr,
                       s_vsp, s_vsh, pid_ptr, s_pb, s_ph, np_ptr, MAXP, m_ptr, l_ptr, acc_ptr, qk_scale, HKV, s, b, h,
                       G, NUM_SPLITS, NPART, NPAGES, SUB, MMA, OPA, OPB, STAGES,
                       (kud, vud, ksd, kzd, vsd, vzd), (rk_p, rk_h, rs_p, rs_h, rv_p, rv_h), TMA)
        if PDL and not HOT_LAST:  # the hot-token launch before this one let it start early: finish only after it
            gl.inline_asm_elementwise("griddepcontrol.wait; // dummy $0", "=r", [], dtype=gl.int32, is_pure=False,
                                      pack=1)


@gluon.jit
def _split_partial(q_ptr, s_qb, s_qh, ku_ptr, vu_ptr, s_up, s_uh, ks_ptr, kz_ptr, s_ksp, s_ksh, vs_ptr, vz_ptr,
                   s_vsp, s_vsh, pid_ptr, s_pb, s_ph, np_ptr, MAXP, m_ptr, l_ptr, acc_ptr, qk_scale, HKV, s, b, h,
                   G: gl.constexpr, NUM_SPLITS: gl.constexpr, NPART: gl.constexpr, NPAGES, SUB: gl.constexpr,
                   MMA: gl.constexpr, OPA: gl.constexpr,
                   OPB: gl.constexpr, STAGES: gl.constexpr = 0, descs=None, rows=None, TMA: gl.constexpr = False):
    """Page split s of (request b, KV head h): its pages' partial (m, l, unnormalized acc) at index 1 + s."""
    # key words: lane (t = lane % 4, g = lane // 4) holds words 4t..4t+3 of tokens g + 8 j (LDG.128)
    KW: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[8, 4], warps_per_cta=[1, 1],
                                        order=[1, 0])
    # value words: lane (t, g) holds words 2g, 2g+1 (LDG.64) of tokens 2t + e + 8 j
    VW: gl.constexpr = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [1, 0], [8, 0], [16, 0], [32, 0]], lane_bases=[[2, 0], [4, 0], [0, 2], [0, 4], [0, 8]],
        warp_bases=[], block_bases=[], shape=[64, 16])
    # key scale/zero pair words 2 w + j (word w, pair j): lane (t, .) holds w = 4t..4t+3 (the words of its keys)
    KSC: gl.constexpr = gl.DistributedLinearLayout(
        reg_bases=[[1], [2], [4]], lane_bases=[[8], [16], [0], [0], [0]], warp_bases=[], block_bases=[], shape=[32])
    VSL: gl.constexpr = gl.SliceLayout(1, MMA)  # value scales/zeros: one a token row of S^T
    hq = HKV * G

    # q^T [128, 8] as the B fragment, channels in the keys' order, log2 units, fp16 (heads >= G: zero)
    qk = gl.arange(0, 128, layout=gl.SliceLayout(1, OPB))
    qn = gl.arange(0, 8, layout=gl.SliceLayout(0, OPB))
    q_at = q_ptr + b.to(gl.int64) * s_qb + (h * G + qn).to(gl.int64)[None, :] * s_qh + _key_channel(qk)[:, None]
    q_b = (gl.load(q_at, mask=(qn < G)[None, :], other=0.0).to(gl.float32) * qk_scale).to(gl.float16)

    ids = pid_ptr + b.to(gl.int64) * s_pb + h.to(gl.int64) * s_ph
    # list positions in 64-token sub-pages (SUB = P / 64 of them a list entry, ``_sub_page``)
    n = gl.minimum(gl.maximum(gl.load(np_ptr + b), 0), MAXP) * SUB
    # pages s, s + NUM_SPLITS, ...: the first page id does not wait for the page count
    lo = s
    hi = n
    ST: gl.constexpr = NUM_SPLITS
    # issued beside the page-count load; a stale id past the list is clamped into the pool (read, never used)
    pg0, half0 = _sub_page(lo, ids, lo < MAXP * SUB, SUB)
    pg0 = gl.minimum(gl.maximum(pg0, 0), NPAGES - 1)
    ok0 = lo < MAXP * SUB

    m_i = gl.full([8], float("-inf"), gl.float32, layout=gl.SliceLayout(0, MMA))
    l_i = gl.zeros([8], gl.float32, layout=gl.SliceLayout(0, MMA))
    pz_i = gl.zeros([8], gl.float32, layout=gl.SliceLayout(0, MMA))
    o_i = gl.zeros([128, 8], gl.float32, layout=MMA)
    zero_s = gl.zeros([64, 8], gl.float32, layout=MMA)
    zero_o = gl.zeros([128, 8], gl.float32, layout=MMA)

    if STAGES > 0:  # the pages stream through a shared-memory ring (sgl_spec/kernels/draft_decode/gluon_stream.py)
        if TMA:  # copied by TMA, counted on a barrier a slot. Only pages the loop waits for are copied (lo < hi
            # also for the early first page): a program must not end with a TMA write into its shared memory
            # still in flight, and unlike cp.async there is no wait_group(0) to drain one
            kb, vb, sc, dst, bars = _tma_buffers(STAGES)
            _tma_page(dst, bars, 0, descs, rows, pg0, h, ok0 & (lo < hi), half0)
        else:  # cp.async by every lane, a commit group a slot
            kb, vb, sc = _stream_buffers(STAGES)
            _copy_page(kb, vb, sc, 0, ku_ptr, vu_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr, s_up, s_uh, s_ksp, s_ksh, s_vsp,
                       s_vsh, pg0, h, ok0, KW, VW, half0)
        for k in gl.static_range(1, STAGES - 1):
            pg_k, half_k = _sub_page(lo + k * ST, ids, lo + k * ST < hi, SUB)
            if TMA:
                _tma_page(dst, bars, k, descs, rows, pg_k, h, lo + k * ST < hi, half_k)
            else:
                _copy_page(kb, vb, sc, k, ku_ptr, vu_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr, s_up, s_uh, s_ksp, s_ksh,
                           s_vsp, s_vsh, pg_k, h, lo + k * ST < hi, KW, VW, half_k)
        pg_a, half_a = _sub_page(lo + (STAGES - 1) * ST, ids, lo + (STAGES - 1) * ST < hi, SUB)
        slot = 0
        phase = 0
        for i in range(lo, hi, ST):
            cta_barrier()  # every lane is past its reads of the slot the next copy fills
            ia = i + (STAGES - 1) * ST
            if TMA:
                fence_async_shared()  # those reads ordered before the TMA unit's writes
                _tma_page(dst, bars, (slot + STAGES - 1) % STAGES, descs, rows, pg_a, h, ia < hi, half_a)
            else:
                _copy_page(kb, vb, sc, (slot + STAGES - 1) % STAGES, ku_ptr, vu_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr,
                           s_up, s_uh, s_ksp, s_ksh, s_vsp, s_vsh, pg_a, h, ia < hi, KW, VW, half_a)
            pg_a, half_a = _sub_page(ia + ST, ids, ia + ST < hi, SUB)
            if TMA:
                mbarrier.wait(bars.index(slot), phase)  # this page's bytes
            else:
                async_copy.wait_group(STAGES - 1)  # this page's group (one group a page, empty ones included)
                cta_barrier()  # the scales other lanes copied
            page = _read_page(kb, vb, sc, slot, KW, VW, KSC, VSL)
            m_i, l_i, pz_i, o_i = _attend(m_i, l_i, pz_i, o_i, q_b, page, zero_s, zero_o, MMA, OPA, OPB)
            slot = (slot + 1) % STAGES
            phase = phase ^ (slot == 0).to(gl.int32)
        if not TMA:
            async_copy.wait_group(0)  # no copy outlives the program (TMA: every copy issued is waited for above)
    else:  # the next page's loads are issued before this page is computed (one page in flight a warp)
        cur = _load_page(ku_ptr, vu_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr, s_up, s_uh, s_ksp, s_ksh, s_vsp, s_vsh,
                         pg0, h, ok0, KW, VW, KSC, VSL, half0)
        pg_next, half_next = _sub_page(lo + ST, ids, lo + ST < hi, SUB)
        for i in range(lo, hi, ST):
            nxt = _load_page(ku_ptr, vu_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr, s_up, s_uh, s_ksp, s_ksh, s_vsp, s_vsh,
                             pg_next, h, i + ST < hi, KW, VW, KSC, VSL, half_next)
            pg_next, half_next = _sub_page(i + 2 * ST, ids, i + 2 * ST < hi, SUB)
            m_i, l_i, pz_i, o_i = _attend(m_i, l_i, pz_i, o_i, q_b, cur, zero_s, zero_o, MMA, OPA, OPB)
            cur = nxt

    # ---- partial (m, l, unnormalized acc) at index 1 + s, physical channel order
    oc = gl.arange(0, 128, layout=gl.SliceLayout(1, MMA))
    on = gl.arange(0, 8, layout=gl.SliceLayout(0, MMA))
    o = o_i * gl.where(oc >= 64, 0.0625, 1.0)[:, None] + pz_i[None, :]
    prow = (b * hq + h * G + on).to(gl.int64) * NPART + 1 + s
    gl.store(acc_ptr + prow[None, :] * 128 + _value_channel(oc)[:, None], o, mask=(on < G)[None, :])
    gl.store(m_ptr + prow, m_i, mask=on < G)
    gl.store(l_ptr + prow, l_i, mask=on < G)
