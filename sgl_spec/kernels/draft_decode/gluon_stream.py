"""The Gluon draft page programs' page stream through shared memory (``STAGES`` > 0; sgl_spec/kernels/draft_decode/gluon_pages.py).

Why: with the page prefetched in registers (``PREFETCH``) ptxas issues the next page's loads only once the current
page's key registers are free, late in the page's compute (SASS: at instruction ~850 of ~1310), so a
warp has less than one page in flight. Here every lane ``cp.async``-es the very words it later reads (the same
distributed layouts KW / VW as the register form), ``STAGES - 1`` (sub-)pages ahead, into a ring of ``STAGES`` slots
of 8960 B: the copies are issued at the top of each page whatever the registers hold, the prefetched page's registers
are free (168 a thread instead of 255), and more programs fit an SM. The key scale/zero words and the value
scales/zeros are copied in plain layouts and read back in the ones ``_attend`` takes (across lanes: one warp barrier
after the wait). 2-4% faster at P = 128 from batch 8 (H100), no faster at batch 1; a stream alone (no math) is only
1-3% faster still, so the page phase is bound by memory, not by the page code. launch.gluon_stream_stages says where
it runs.

``TMA`` (where the tensors can be addressed as TMA rows: ``tma_args``; ``_tma_buffers``, ``_tma_page``): the same slots filled by six TMA copies a
page that one lane issues (key and value words as boxes of 64 rows of 16 words, the four scale rows as boxes of one
row; descriptors: ``tma_args``), counted on an mbarrier a slot, so no lane spends instructions or registers on
addresses and the memory system gets whole 4 KiB boxes: the dense draft at batch 8 is 3-5% faster than with cp.async
(H200); outputs are bit-equal.

Shared memory a program (one warp): 8960 B x STAGES (2: 17.5 KiB, 12 programs an SM; 3: 26.3 KiB, 8 programs; an
H100 SM has 228 KiB), plus an 8-byte barrier a slot with TMA. The cp.async ring's value words are swizzled (8-word
vectors of odd token pairs swapped): VW's half-warps read 4 even tokens x 8 words, which unswizzled share 8 banks
(4-way conflict); swizzled 2-way, the least for 64-byte rows. The TMA ring keeps them unswizzled (the NVMMA swizzles
are not that pattern).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

# shared layouts of one slot (the ring's leading dim is the slot index)
FLAT2 = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
VSW2 = gl.constexpr(gl.SwizzledSharedLayout(vec=8, per_phase=2, max_phase=2, order=[1, 0]))
FLAT1 = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[0]))
CP2 = gl.constexpr(gl.BlockedLayout(size_per_thread=[2], threads_per_warp=[32], warps_per_cta=[1], order=[0]))
# TMA destinations (``TMA``): unswizzled rows (TMA's NVMMA swizzles are not VSW2's pattern), read back through FLAT2 /
# FLAT1 views of the same bytes
TW = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2))
TH = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2))
SLOT_BYTES = gl.constexpr(4 * (2 * 64 * 16 + 2 * 64) + 2 * (2 * 64))  # words, key scale/zero words, value scales/zeros


@gluon.jit
def _page_words(ku_ptr, vu_ptr, s_up, s_uh, pg, h, half, KW: gl.constexpr, VW: gl.constexpr):
    """Pointers to one 64-token (sub-)page's key words [64, 16] (layout KW) and value words [64, 16] (layout VW) of
    KV head h (``pg`` int64 page id; ``half``: which 64 tokens of a 128-token page): what ``_load_page`` loads into
    registers and ``_copy_page`` copies into a ring slot."""
    base = pg * s_up + h * s_uh + half * 1024  # 64 tokens x 16 words
    kt = gl.arange(0, 64, layout=gl.SliceLayout(1, KW))
    kc = gl.arange(0, 16, layout=gl.SliceLayout(0, KW))
    vt = gl.arange(0, 64, layout=gl.SliceLayout(1, VW))
    vc = gl.arange(0, 16, layout=gl.SliceLayout(0, VW))
    return ku_ptr + base + kt[:, None] * 16 + kc[None, :], vu_ptr + base + vt[:, None] * 16 + vc[None, :]


@gluon.jit
def _stream_buffers(STAGES: gl.constexpr):
    """The ring: key words, value words [STAGES, 64, 16] int32; key scale words, key zero words [STAGES, 64] int32;
    value scales, value zeros [STAGES, 64] fp16."""
    kb = gl.allocate_shared_memory(gl.int32, [STAGES, 64, 16], FLAT2)
    vb = gl.allocate_shared_memory(gl.int32, [STAGES, 64, 16], VSW2)
    ksb = gl.allocate_shared_memory(gl.int32, [STAGES, 64], FLAT1)
    kzb = gl.allocate_shared_memory(gl.int32, [STAGES, 64], FLAT1)
    vsb = gl.allocate_shared_memory(gl.float16, [STAGES, 64], FLAT1)
    vzb = gl.allocate_shared_memory(gl.float16, [STAGES, 64], FLAT1)
    return kb, vb, (ksb, kzb, vsb, vzb)


@gluon.jit
def _copy_page(kb, vb, sc, slot, ku_ptr, vu_ptr, ks_ptr, kz_ptr, vs_ptr, vz_ptr, s_up, s_uh, s_ksp, s_ksh, s_vsp,
               s_vsh, page, h, ok, KW: gl.constexpr, VW: gl.constexpr, half=0):
    """cp.async of one 64-token (sub-)page of KV head h into ring slot ``slot`` (nothing copied where not ``ok``:
    the slot is then never read), as one commit group."""
    pg = page.to(gl.int64)
    kp, vp = _page_words(ku_ptr, vu_ptr, s_up, s_uh, pg, h, half, KW, VW)
    kn = gl.where(ok, 64, 0)
    kt = gl.arange(0, 64, layout=gl.SliceLayout(1, KW))
    async_copy.async_copy_global_to_shared(kb.index(slot), kp, mask=(kt < kn)[:, None], cache_modifier=".cg")
    vt = gl.arange(0, 64, layout=gl.SliceLayout(1, VW))
    async_copy.async_copy_global_to_shared(vb.index(slot), vp, mask=(vt < kn)[:, None])
    c = gl.arange(0, 64, layout=CP2)
    cm = c < kn
    so = pg * s_ksp + h * s_ksh + c  # 64 words: 128 fp16 channel scales (zeros)
    ksb, kzb, vsb, vzb = sc
    async_copy.async_copy_global_to_shared(ksb.index(slot), ks_ptr + so, mask=cm)
    async_copy.async_copy_global_to_shared(kzb.index(slot), kz_ptr + so, mask=cm)
    vo = pg * s_vsp + h * s_vsh + half * 64 + c
    async_copy.async_copy_global_to_shared(vsb.index(slot), vs_ptr + vo, mask=cm)
    async_copy.async_copy_global_to_shared(vzb.index(slot), vz_ptr + vo, mask=cm)
    async_copy.commit_group()


@gluon.jit
def _read_page(kb, vb, sc, slot, KW: gl.constexpr, VW: gl.constexpr, KSC: gl.constexpr, VSL: gl.constexpr):
    """Ring slot ``slot`` as ``_load_page`` returns a page: (key words, value words, key scale words lo / hi, key
    zero words lo / hi, value scales, value zeros)."""
    kw = kb.index(slot).load(KW)
    vw = vb.index(slot).load(VW)
    ksb, kzb, vsb, vzb = sc
    ss = ksb.index(slot)
    zs = kzb.index(slot)
    s_lo = ss.slice(0, 32).load(KSC)
    s_hi = ss.slice(32, 32).load(KSC)
    z_lo = zs.slice(0, 32).load(KSC)
    z_hi = zs.slice(32, 32).load(KSC)
    vs = vsb.index(slot).load(VSL)
    vz = vzb.index(slot).load(VSL)
    return kw, vw, s_lo, s_hi, z_lo, z_hi, vs, vz


@gluon.jit
def _tma_buffers(STAGES: gl.constexpr):
    """The ring for TMA copies (``TMA``): the same slots as ``_stream_buffers`` as the copies write them ([STAGES, 64,
    16] words, [STAGES, 1, 64] scale rows), read back through plain views of the same bytes, and one mbarrier a
    slot -> (key words, value words, scales (as ``_stream_buffers``), TMA destinations, barriers)."""
    kt = gl.allocate_shared_memory(gl.int32, [STAGES, 64, 16], TW)
    vt = gl.allocate_shared_memory(gl.int32, [STAGES, 64, 16], TW)
    kst = gl.allocate_shared_memory(gl.int32, [STAGES, 1, 64], TW)
    kzt = gl.allocate_shared_memory(gl.int32, [STAGES, 1, 64], TW)
    vst = gl.allocate_shared_memory(gl.float16, [STAGES, 1, 64], TH)
    vzt = gl.allocate_shared_memory(gl.float16, [STAGES, 1, 64], TH)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for k in gl.static_range(STAGES):
        mbarrier.init(bars.index(k), count=1)
    fence_async_shared()
    kb = kt._reinterpret(gl.int32, [STAGES, 64, 16], FLAT2)
    vb = vt._reinterpret(gl.int32, [STAGES, 64, 16], FLAT2)
    sc = (kst._reinterpret(gl.int32, [STAGES, 64], FLAT1), kzt._reinterpret(gl.int32, [STAGES, 64], FLAT1),
          vst._reinterpret(gl.float16, [STAGES, 64], FLAT1), vzt._reinterpret(gl.float16, [STAGES, 64], FLAT1))
    return kb, vb, sc, (kt, vt, kst, kzt, vst, vzt), bars


@gluon.jit
def _tma_page(dst, bars, slot, descs, rows, page, h, ok, half=0):
    """TMA copies of one 64-token (sub-)page of KV head h into ring slot ``slot``, counted on its barrier (nothing
    where not ``ok``: the slot is then never waited for). ``descs``: the planes' and scales' descriptors, ``rows``
    their rows a page and a head (sgl_spec/kernels/draft_decode/triton.py)."""
    kt, vt, kst, kzt, vst, vzt = dst
    kud, vud, ksd, kzd, vsd, vzd = descs
    rk_p, rk_h, rs_p, rs_h, rv_p, rv_h = rows
    bar = bars.index(slot)
    mbarrier.expect(bar, SLOT_BYTES, pred=ok)
    row = page * rk_p + h * rk_h + half * 64
    tma.async_copy_global_to_shared(kud, [row, 0], bar, kt.index(slot), pred=ok)
    tma.async_copy_global_to_shared(vud, [row, 0], bar, vt.index(slot), pred=ok)
    srow = page * rs_p + h * rs_h
    tma.async_copy_global_to_shared(ksd, [srow, 0], bar, kst.index(slot), pred=ok)
    tma.async_copy_global_to_shared(kzd, [srow, 0], bar, kzt.index(slot), pred=ok)
    vrow = page * rv_p + h * rv_h + half
    tma.async_copy_global_to_shared(vsd, [vrow, 0], bar, vst.index(slot), pred=ok)
    tma.async_copy_global_to_shared(vzd, [vrow, 0], bar, vzt.index(slot), pred=ok)


def tma_args(ku, vu, ks32, kz32, v_scale, v_zero):
    """``_draft_pages_kernel``'s keywords for TMA copies into the ring (``TMA``): the descriptors of the key and
    value words (rows of 16 words, boxes of 64 tokens), of the key scale/zero words and of the value scales/zeros
    (rows of 64, boxes of one row), and their rows a page and a head (sgl_spec/kernels/common/tma_rows.py); None where these
    tensors cannot be addressed so (the cp.async ring then runs)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from sgl_spec.kernels.common.tma_rows import as_rows, row_strides, rows_ok

    if not (rows_ok(ku, 16) and rows_ok(vu, 16) and all(rows_ok(t, 64) for t in (ks32, kz32, v_scale, v_zero))):
        return None
    if as_rows(ku, 16).shape[0] >= 2 ** 31 or as_rows(vu, 16).shape[0] >= 2 ** 31:  # int32 coordinates
        return None
    w, f = TW.value, TH.value
    rk, rs, rv = row_strides(ku, 16), row_strides(ks32, 64), row_strides(v_scale, 64)
    return dict(kud=TensorDescriptor.from_tensor(as_rows(ku, 16), [64, 16], w),
                vud=TensorDescriptor.from_tensor(as_rows(vu, 16), [64, 16], w),
                ksd=TensorDescriptor.from_tensor(as_rows(ks32, 64), [1, 64], w),
                kzd=TensorDescriptor.from_tensor(as_rows(kz32, 64), [1, 64], w),
                vsd=TensorDescriptor.from_tensor(as_rows(v_scale, 64), [1, 64], f),
                vzd=TensorDescriptor.from_tensor(as_rows(v_zero, 64), [1, 64], f),
                rk_p=rk[0], rk_h=rk[1], rs_p=rs[0], rs_h=rs[1], rv_p=rv[0], rv_h=rv[1], TMA=True)
