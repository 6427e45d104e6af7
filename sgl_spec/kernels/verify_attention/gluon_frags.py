"""INT8 page words -> ``mma.sync.m16n8k16`` operands, in Gluon, for the four-warp verify page programs
(sgl_spec/kernels/verify_attention/gluon_pages.py): the word asm, the fragment layouts and the conversions of a group of four 64-token
pages (page w of the group on warp w for the keys, 32 channels a warp for the values), plus the per-warp reductions
over a page's tokens. Byte layout of the planes: sgl_spec/kvcache/format.py; the nibble-by-nibble Triton twin:
sgl_spec/kernels/common/int8_words.py."""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from sgl_spec.kernels.draft_decode.gluon_pages import _f16_pair
from sgl_spec.kernels.common.int8_words import _ASM_PREP

# INT8 codes byte-wise: for a word pair (upper u, lower l) of 4 bytes, ``(u << 4) & 0xF0.. | l & 0x0F..`` is the 4
# codes c = 16 u + l of the low-nibble channels and ``u & 0xF0.. | (l >> 4) & 0x0F..`` those of the high-nibble
# channels (one shift, one LOP3 each); a PRMT with the constant 0x64 then puts two code bytes under an fp16 exponent
# (0x64xx = 1024 + c) and one HSUB2 of 1152 centres them (c - 128, exact). 12 instructions for 8 codes, where the
# nibble-by-nibble form (sgl_spec/kernels/common/int8_words.py) takes 16.
#
# keys: $4 upper word, $5 lower word; $6..$9 (s/16, z') pairs (4w, 4w+1), (4w+2, 4w+3) of the low half as s01, s23,
# z01, z23, $10..$13 the high half -> $0, $1 dequantized fp16 pairs of the low half, $2, $3 of the high half
_ASM_KEYS = gl.constexpr("""{
.reg .b32 t, c0, c1, r, bias;
shl.b32 t, $4, 4;
lop3.b32 c0, t, $5, 0xF0F0F0F0, 0xE4;
shr.u32 t, $5, 4;
lop3.b32 c1, $4, t, 0xF0F0F0F0, 0xE4;
mov.b32 bias, 0x64806480;
prmt.b32 r, c0, 0x64, 0x4140;
sub.f16x2 r, r, bias;
fma.rn.f16x2 $0, r, $6, $8;
prmt.b32 r, c0, 0x64, 0x4342;
sub.f16x2 r, r, bias;
fma.rn.f16x2 $1, r, $7, $9;
prmt.b32 r, c1, 0x64, 0x4140;
sub.f16x2 r, r, bias;
fma.rn.f16x2 $2, r, $10, $12;
prmt.b32 r, c1, 0x64, 0x4342;
sub.f16x2 r, r, bias;
fma.rn.f16x2 $3, r, $11, $13;
}""")
# values: two tokens' 16-bit halves (bytes 2c, 2c+1 of one word) of the upper ($4 even token, $5 odd) and lower ($6,
# $7) planes -> 4 fp16 pairs (even, odd token) of centred codes c - 128: $0 byte 2c's low-nibble channel, $1 byte
# 2c+1's, $2 byte 2c's high-nibble channel, $3 byte 2c+1's
_ASM_VHALF = gl.constexpr("""{
.reg .b32 u, l, t, c0, c1, bias;
mov.b32 u, {$4, $5};
mov.b32 l, {$6, $7};
shl.b32 t, u, 4;
lop3.b32 c0, t, l, 0xF0F0F0F0, 0xE4;
shr.u32 t, l, 4;
lop3.b32 c1, u, t, 0xF0F0F0F0, 0xE4;
mov.b32 bias, 0x64806480;
prmt.b32 t, c0, 0x64, 0x4240;
sub.f16x2 $0, t, bias;
prmt.b32 t, c0, 0x64, 0x4341;
sub.f16x2 $1, t, bias;
prmt.b32 t, c1, 0x64, 0x4240;
sub.f16x2 $2, t, bias;
prmt.b32 t, c1, 0x64, 0x4341;
sub.f16x2 $3, t, bias;
}""")

# ---- fragment layouts (4 warps: MMA rows R = 64 r + 16 w + i on warp w) ------------------------------------------------------------------------------------
MMA = gl.constexpr(gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8]))
OPA = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=MMA.value, k_width=2))
OPB = gl.constexpr(gl.DotOperandLayout(operand_index=1, parent=MMA.value, k_width=2))
ROWS = gl.constexpr(gl.SliceLayout(1, MMA.value))
COLS = gl.constexpr(gl.SliceLayout(0, MMA.value))
# value scales/zeros [4 w, 4 r, 16 i] in shared memory order, held as the rows (R = 64 r + 16 w + i) of S^T
VSL = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[0, 0, 8], [0, 1, 0], [0, 2, 0]], lane_bases=[[0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 0, 2],
                                                            [0, 0, 4]],
    warp_bases=[[1, 0, 0], [2, 0, 0]], block_bases=[], shape=[4, 4, 16]))
# value half-words of one page [64 tokens, 32]: lane (g, t) of warp w holds half-word 8 w + g of tokens
# 2 t + e + 8 h' + 16 ks (the V^T A fragment's k index; ptxas reads them with LDSM.16.MT88)
VH = gl.constexpr(gl.DistributedLinearLayout(
    reg_bases=[[1, 0], [8, 0], [16, 0], [32, 0]], lane_bases=[[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]],
    warp_bases=[[0, 8], [0, 16]], block_bases=[], shape=[64, 32]))


@gluon.constexpr_function
def _mx_layout(N):
    """[4, N]: the four pages' maxima of every column in each thread's registers, columns held as the MMA
    accumulator holds them (COLS: column bit 0 and the n-tiles in registers, bits 1-2 on lanes 0-1)."""
    regs = [[1, 0], [2, 0], [0, 1]] + [[0, 8 << k] for k in range(N.bit_length() - 4)]
    return gl.DistributedLinearLayout(reg_bases=regs, lane_bases=[[0, 2], [0, 4], [0, 0], [0, 0], [0, 0]],
                                      warp_bases=[[0, 0], [0, 0]], block_bases=[], shape=[4, N])


@gluon.jit
def _value_row_channel(R):
    """Head-dim channel of row R of the O^T tile (the V^T A fragment): R = 64 r + 16 w + 8 h + g holds byte
    2 (g & 1) + h, nibble r of value word 4 w + (g >> 1), i.e. channel 64 r + 16 w + 2 g + h."""
    return (R & 0xF0) + 2 * (R & 7) + ((R >> 3) & 1)


@gluon.jit
def _prep(s, z):
    """Key scale / zero pair words -> (s/16, z + 7.53125 s) pair words (``int8_words._ASM_PREP``)."""
    return gl.inline_asm_elementwise(_ASM_PREP, "=r,=r,r,r", [s, z], dtype=(gl.int32, gl.int32), is_pure=True,
                                     pack=1)


@gluon.jit
def _values_a(vu, vl, OP: gl.constexpr):
    """Value half-words of both planes [64 tokens, 32] (half-word 8 w + g: bytes 2 (g & 1), +1 of word 4 w + (g >> 1))
    -> V^T [128, 64 tokens] fp16 centred codes in the A fragment layout, row R = 64 r + 16 w + 8 h + g
    (``_value_row_channel``)."""
    ue, uo = gl.split(gl.permute(gl.reshape(vu, [32, 2, 32]), [0, 2, 1]))
    le, lo = gl.split(gl.permute(gl.reshape(vl, [32, 2, 32]), [0, 2, 1]))
    a, b, c, d = gl.inline_asm_elementwise(
        _ASM_VHALF, "=r,=r,=r,=r,h,h,h,h", [ue, uo, le, lo], dtype=(gl.int32,) * 4, is_pure=True, pack=1)
    lo_n = gl.join(_f16_pair(a), _f16_pair(b))  # [32 pairs, 32 hw, e, h]
    hi_n = gl.join(_f16_pair(c), _f16_pair(d))
    t = gl.reshape(gl.join(lo_n, hi_n), [32, 4, 8, 2, 2, 2])  # pair, w, g, e, h, r
    t = gl.permute(t, [5, 1, 4, 2, 0, 3])  # r, w, h, g, pair, e
    return gl.convert_layout(gl.reshape(t, [128, 64]), OP, assert_trivial=True)


@gluon.jit
def _rows(x):
    """[4 w, 4 r, 16 i] (shared memory order) -> [256] indexed by R = 64 r + 16 w + i, as the rows of S^T."""
    return gl.convert_layout(gl.reshape(gl.permute(x, [1, 0, 2]), [256]), ROWS, assert_trivial=True)


@gluon.jit
def _scores(ksm_u, ksm_l, sss, zss, qsm, qsm_b, zero_s, zero_b, N2: gl.constexpr):
    """S^T [256, N] = K q^T in four MMAs over 32-channel chunks c (words w with w mod 4 = c), the words and their
    scale/zero pairs read from shared memory chunk by chunk, so that only a quarter of the key words, of their
    scales, of their conversion and of q^T's fragments is live at a time (at N = 32 the whole tile at once spilled)."""
    # words 4 v + c of token rows page * 64 + 16 r + i: lane (g, t) holds v = t of rows i = g + 8 j
    KWC: gl.constexpr = gl.DistributedLinearLayout(
        reg_bases=[[8, 0, 0], [16, 0, 0], [32, 0, 0]], lane_bases=[[0, 1, 0], [0, 2, 0], [1, 0, 0], [2, 0, 0],
                                                                  [4, 0, 0]],
        warp_bases=[[64, 0, 0], [128, 0, 0]], block_bases=[], shape=[256, 4, 1])
    sc = zero_s
    sc_b = zero_b
    for c in gl.static_range(4):
        s01, s23, t01, t23 = _pairs_c(sss, c)
        z01, z23, y01, y23 = _pairs_c(zss, c)
        s01, z01 = _prep(s01, z01)
        s23, z23 = _prep(s23, z23)
        t01, y01 = _prep(t01, y01)
        t23, y23 = _prep(t23, y23)
        ka = _keys_chunk(_word_c(ksm_u, c, KWC), _word_c(ksm_l, c, KWC), s01, s23, z01, z23, t01, t23, y01, y23, OPA)
        sc = mma_v2(ka, qsm.slice(32 * c, 32).load(OPB), sc)
        if N2 > 0:  # tile B (sgl_spec/kernels/verify_attention/gluon_rules.py row_tiles) on the same converted keys
            sc_b = mma_v2(ka, qsm_b.slice(32 * c, 32).load(OPB), sc_b)
    return sc, sc_b


@gluon.jit
def _pairs_c(ssm, c: gl.constexpr):
    """Scale (or zero) pair words of the words 4 v + c from shared memory [4 w, 64] (pair 32 h + 2 word + j) ->
    (low half j = 0, j = 1, high half j = 0, j = 1), each [4 w, 4 v]; lane (., t) holds v = t."""
    SCL: gl.constexpr = gl.DistributedLinearLayout(
        reg_bases=[[0, 0, 0, 0, 1], [0, 1, 0, 0, 0]], lane_bases=[[0, 0, 1, 0, 0], [0, 0, 2, 0, 0], [0, 0, 0, 0, 0],
                                                                 [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]],
        warp_bases=[[1, 0, 0, 0, 0], [2, 0, 0, 0, 0]], block_bases=[], shape=[4, 2, 4, 1, 2])
    x = ssm.reshape([4, 2, 4, 4, 2]).slice(c, 1, dim=3).load(SCL)  # w, h, v, c, j
    x = gl.permute(gl.reshape(x, [4, 2, 4, 2]), [0, 2, 1, 3])  # w, v, h, j
    lo, hi = gl.split(gl.permute(x, [0, 1, 3, 2]))  # [4, 4, j] each
    lo0, lo1 = gl.split(lo)
    hi0, hi1 = gl.split(hi)
    return lo0, lo1, hi0, hi1


@gluon.jit
def _word_c(ksm, c: gl.constexpr, KWC: gl.constexpr):
    """Key words 4 v + c of the group's token rows, from shared memory [256, 16] -> [4 r, 4 w, 16 i, 4 v]."""
    x = ksm.reshape([256, 4, 4]).slice(c, 1, dim=2).load(KWC)
    return gl.permute(gl.reshape(x, [4, 4, 16, 4]), [1, 0, 2, 3])


@gluon.jit
def _bc(x, SL: gl.constexpr):
    """[4 w, 4 v] -> [1, 4, 1, 4] in the key words' layout (each lane holds its own words' pairs)."""
    return gl.convert_layout(x, SL)[None, :, None, :]


@gluon.jit
def _keys_chunk(wu, wl, s01, s23, z01, z23, t01, t23, y01, y23, OP: gl.constexpr):
    """Words 4 v + c of both planes [4 r, 4 w, 16 i, 4 v] + their prepared scale/zero pairs -> dequantized keys of
    chunk c, [256, 32] fp16 in the A fragment layout: column 16 h + 8 p + 4 v1 + 2 v0 + e (``_key_channel``'s
    order within the chunk)."""
    SL: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(2, wu.type.layout))
    o0, o1, o2, o3 = gl.inline_asm_elementwise(
        _ASM_KEYS, "=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r",
        [wu, wl, _bc(s01, SL), _bc(s23, SL), _bc(z01, SL), _bc(z23, SL), _bc(t01, SL), _bc(t23, SL), _bc(y01, SL),
         _bc(y23, SL)],
        dtype=(gl.int32, gl.int32, gl.int32, gl.int32), is_pure=True, pack=1)
    o0 = gl.reshape(o0, [256, 4])
    o1 = gl.reshape(o1, [256, 4])
    o2 = gl.reshape(o2, [256, 4])
    o3 = gl.reshape(o3, [256, 4])
    t = gl.join(gl.join(_f16_pair(o0), _f16_pair(o1)), gl.join(_f16_pair(o2), _f16_pair(o3)))  # [256,4,e,p,h]
    t = gl.reshape(t, [256, 2, 2, 2, 2, 2])  # R, v1, v0, e, p, h
    t = gl.permute(t, [0, 5, 4, 1, 2, 3])  # R, h, p, v1, v0, e
    return gl.convert_layout(gl.reshape(t, [256, 32]), OP, assert_trivial=True)


@gluon.jit
def _per_warp(x):
    """[256, N] (MMA rows R = 64 r + 16 w + i) -> sums over each warp's 64 rows [4 w, N] (intra-warp)."""
    N: gl.constexpr = x.shape[1]
    return gl.sum(gl.sum(gl.reshape(x, [4, 4, 16, N]), 0), 1)  # r (registers) first, then i (lanes)


@gluon.jit
def _per_lane(x):
    """[256, N] (MMA rows R = 64 r + 16 w + 8 j + g: lane g of warp w holds rows j = 0, 1 of each r) -> each lane's
    sums over its own rows [4 w, 8 g, N]: registers only, no shuffles (``_per_warp`` is this, then a sum over g)."""
    N: gl.constexpr = x.shape[1]
    return gl.sum(gl.sum(gl.reshape(x, [4, 4, 2, 8, N]), 0), 1)
