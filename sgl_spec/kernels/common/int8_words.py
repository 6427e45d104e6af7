"""INT8 view of the nibble planes, word-wise: two int32 words (upper plane, lower plane; 4 packed bytes each) ->
fp16 pairs of exact codes ``c - 128`` (values) or dequantized keys, for ``verify_attention``.

Byte ``k`` of a word holds channel ``4w + k`` in its low nibble and channel ``4w + k + D/2`` in its high nibble
(sgl_spec/kvcache/format.py); the INT8 code of a channel is ``c = 16 u + l`` (u from the upper plane, l from the lower one)
and its value ``x = z + (s/16)(c - 7.5) = (z + 7.53125 s) + (s/16)(c - 128)``.

Per word pair one asm block (``_PAIR``): a PRMT spreads bytes (0, 1) / (2, 3) of each word into the two 16-bit lanes
with 0x64 above them; ``0x64 | (u << 4) | l`` (low channels: one shift, one LOP3) and ``0x64 | (u & 0xF0) | (l >> 4)``
(high channels: one shift, one LOP3) are the fp16 numbers ``1024 + c``; one HSUB2 of 1152 gives ``c - 128`` exactly
(centred, so p·(c - 128) products stay small in the fp32 accumulator). Keys then take one fused f16x2 FMA with the
per-channel ``s/16`` and ``z + 7.53125 s`` (both prepared once per page by ``prep_key_scales``): one fp16 rounding of
the dequantized key, as if the INT8 view were stored in fp16 (plus the rounding of the folded zero). ~16 instructions
per 8 values, ~20 per 8 keys; an int->float convert (1/4 rate on Hopper) would cost more than the memory time.
The interpreter runs an integer/fp32 path with the same results (up to fp16 double rounding of the keys).
"""
from __future__ import annotations

import triton
import triton.language as tl

from sgl_spec.kernels.common.nibble_words import _f16_pair, _tile

_PAIR = """
.reg .b32 a0, a1, b0, b1, t0, t1, r0, r1, r2, r3, bias;
prmt.b32 a0, $4, 0x64, 0x4140;
prmt.b32 a1, $4, 0x64, 0x4342;
prmt.b32 b0, $5, 0x64, 0x4140;
prmt.b32 b1, $5, 0x64, 0x4342;
shl.b32 t0, a0, 4;
shl.b32 t1, a1, 4;
lop3.b32 r0, t0, b0, 0x00F000F0, 0xE4;
lop3.b32 r1, t1, b1, 0x00F000F0, 0xE4;
shr.u32 t0, b0, 4;
shr.u32 t1, b1, 4;
lop3.b32 r2, a0, t0, 0x000F000F, 0xD8;
lop3.b32 r3, a1, t1, 0x000F000F, 0xD8;
mov.b32 bias, 0x64806480;
"""
# outputs $0..$3: channel pairs (4w, 4w+1), (4w+2, 4w+3) of the low half, then of the high half
_ASM_VALUES = tl.constexpr("{" + _PAIR + """
sub.f16x2 $0, r0, bias;
sub.f16x2 $1, r1, bias;
sub.f16x2 $2, r2, bias;
sub.f16x2 $3, r3, bias;
}""")
# $6..$9: (s/16, z') pairs (4w, 4w+1), (4w+2, 4w+3) of the low half as s01, s23, z01, z23; $10..$13 the high half
_ASM_KEYS = tl.constexpr("{" + _PAIR + """
sub.f16x2 r0, r0, bias;
sub.f16x2 r1, r1, bias;
sub.f16x2 r2, r2, bias;
sub.f16x2 r3, r3, bias;
fma.rn.f16x2 $0, r0, $6, $8;
fma.rn.f16x2 $1, r1, $7, $9;
fma.rn.f16x2 $2, r2, $10, $12;
fma.rn.f16x2 $3, r3, $11, $13;
}""")
# s/16 (exact unless subnormal) and z' = z + 7.53125 s (one rounding: the FMA's product is exact), per fp16 pair
_ASM_PREP = tl.constexpr("""{
.reg .b32 c;
mov.b32 c, 0x2C002C00;
mul.rn.f16x2 $0, $2, c;
mov.b32 c, 0x47884788;
fma.rn.f16x2 $1, $2, c, $3;
}""")


@triton.jit
def _codes(wu, wl, k: tl.constexpr):
    """Interpreter path: INT8 codes (low channel, high channel) of byte k of each word, int32."""
    bu = (wu >> (8 * k)) & 255
    bl = (wl >> (8 * k)) & 255
    return ((bu & 15) << 4) | (bl & 15), (bu & 240) | (bl >> 4)


@triton.jit
def _codes_f32(wu, wl):
    """Interpreter path: ``c - 128`` as fp32 tiles [R, 4 BW] (low half, high half), channel = column."""
    R: tl.constexpr = wu.shape[0]
    C: tl.constexpr = 4 * wu.shape[1]
    l0, h0 = _codes(wu, wl, 0)
    l1, h1 = _codes(wu, wl, 1)
    l2, h2 = _codes(wu, wl, 2)
    l3, h3 = _codes(wu, wl, 3)
    lo = tl.join(tl.join(l0, l1), tl.join(l2, l3)).to(tl.float32) - 128.0
    hi = tl.join(tl.join(h0, h1), tl.join(h2, h3)).to(tl.float32) - 128.0
    return tl.reshape(tl.permute(lo, (0, 1, 3, 2)), (R, C)), tl.reshape(tl.permute(hi, (0, 1, 3, 2)), (R, C))


@triton.jit
def values_i8(wu, wl, USE_ASM: tl.constexpr):
    """Upper/lower int32 words [P, BW] -> exact fp16 ``c - 128`` tiles [P, 4 BW] (low half, high half of D)."""
    if USE_ASM:
        l01, l23, h01, h23 = tl.inline_asm_elementwise(
            _ASM_VALUES, "=r,=r,=r,=r,r,r", [wu, wl], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
        return _tile(l01, l23), _tile(h01, h23)
    else:
        lo, hi = _codes_f32(wu, wl)
        return lo.to(tl.float16), hi.to(tl.float16)


@triton.jit
def _pair_bits(x):
    """fp32 [..., 2] (values exact in fp16) -> int32 fp16-pair words [...]."""
    lo, hi = tl.split(x.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF)
    return lo | (hi << 16)


@triton.jit
def prep_key_scales(s, z, USE_ASM: tl.constexpr):
    """int32 fp16-pair tiles of key scales / zeros -> (s/16, z + 7.53125 s) as int32 fp16-pair tiles."""
    if USE_ASM:
        return tl.inline_asm_elementwise(_ASM_PREP, "=r,=r,r,r", [s, z], dtype=(tl.int32, tl.int32), is_pure=True,
                                         pack=1)
    else:
        sf = _f16_pair(s).to(tl.float32)
        zf = _f16_pair(z).to(tl.float32)
        return _pair_bits(sf * 0.0625), _pair_bits(sf * 7.53125 + zf)


@triton.jit
def keys_i8(wu, wl, s_lo, z_lo, s_hi, z_hi, USE_ASM: tl.constexpr):
    """Upper/lower int32 words [P, BW] + prepared key scales (``prep_key_scales``) as int32 fp16-pair tiles [BW, 2]
    (pairs (4w, 4w+1), (4w+2, 4w+3)) -> dequantized keys fp16 [P, 4 BW] (low half, high half of D)."""
    sl01, sl23 = tl.split(s_lo)
    zl01, zl23 = tl.split(z_lo)
    sh01, sh23 = tl.split(s_hi)
    zh01, zh23 = tl.split(z_hi)
    return keys_i8_v(wu, wl, sl01, sl23, zl01, zl23, sh01, sh23, zh01, zh23, USE_ASM)


@triton.jit
def keys_i8_v(wu, wl, sl01, sl23, zl01, zl23, sh01, sh23, zh01, zh23, USE_ASM: tl.constexpr):
    """``keys_i8`` with the prepared scale pairs as separate int32 vectors [BW] (s/16 and z' of channel pairs
    (4w, 4w+1) and (4w+2, 4w+3), low half then high half of D)."""
    if USE_ASM:
        l01, l23, h01, h23 = tl.inline_asm_elementwise(
            _ASM_KEYS, "=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r",
            [wu, wl, sl01[None, :], sl23[None, :], zl01[None, :], zl23[None, :],
             sh01[None, :], sh23[None, :], zh01[None, :], zh23[None, :]],
            dtype=(tl.int32,) * 4, is_pure=True, pack=1)
        return _tile(l01, l23), _tile(h01, h23)
    else:  # fp32 (c - 128) s' + z' rounded once to fp16, as the fused f16x2 FMA does (up to a double rounding)
        C: tl.constexpr = 4 * wu.shape[1]
        lo, hi = _codes_f32(wu, wl)
        s_l = tl.reshape(_f16_pair(tl.join(sl01, sl23)), (C,)).to(tl.float32)
        z_l = tl.reshape(_f16_pair(tl.join(zl01, zl23)), (C,)).to(tl.float32)
        s_h = tl.reshape(_f16_pair(tl.join(sh01, sh23)), (C,)).to(tl.float32)
        z_h = tl.reshape(_f16_pair(tl.join(zh01, zh23)), (C,)).to(tl.float32)
        return (lo * s_l[None, :] + z_l[None, :]).to(tl.float16), (hi * s_h[None, :] + z_h[None, :]).to(tl.float16)


@triton.jit
def _splat_pair(x):
    """fp16 [R] -> int32 [R] holding the fp16 twice (an f16x2 of (x, x))."""
    b = x.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    return b | (b << 16)


@triton.jit
def values_deq(wu, wl, vs, vz, USE_ASM: tl.constexpr):
    """Upper/lower int32 words [P, BW] + per-token fp16 value scales / zeros [P] -> dequantized fp16 values
    ``(z + 7.53125 s) + (s/16)(c - 128)`` [P, 4 BW] (low half, high half of D): the keys' arithmetic with a
    per-token instead of a per-channel scale (one fp16 rounding per value, plus the folded zero's)."""
    if USE_ASM:
        s2, z2 = tl.inline_asm_elementwise(_ASM_PREP, "=r,=r,r,r", [_splat_pair(vs), _splat_pair(vz)],
                                           dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
        s2 = s2[:, None]
        z2 = z2[:, None]
        l01, l23, h01, h23 = tl.inline_asm_elementwise(
            _ASM_KEYS, "=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r", [wu, wl, s2, s2, z2, z2, s2, s2, z2, z2],
            dtype=(tl.int32,) * 4, is_pure=True, pack=1)
        return _tile(l01, l23), _tile(h01, h23)
    else:
        lo, hi = _codes_f32(wu, wl)
        sf = vs.to(tl.float32)
        s16 = (sf * 0.0625).to(tl.float16).to(tl.float32)[:, None]
        zz = (sf * 7.53125 + vz.to(tl.float32)).to(tl.float16).to(tl.float32)[:, None]
        return (lo * s16 + zz).to(tl.float16), (hi * s16 + zz).to(tl.float16)
