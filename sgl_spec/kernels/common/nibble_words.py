"""Nibble words -> fp16 for ``draft_decode`` (sgl_spec/kernels/draft_decode/triton.py): the 4-bit upper plane read as int32 words,
converted by inline PTX on the GPU and by an equivalent integer/fp32 path under the interpreter (moved out of
draft_decode.py unchanged; sgl_spec/kernels/common/int8_words.py builds on ``_f16_pair`` / ``_tile``)."""
from __future__ import annotations

import triton
import triton.language as tl

# ---- nibble -> fp16 ------------------------------------------------------------------------------------------------
# The planes are read as int32 words (4 packed bytes = channels 4w..4w+3, each with its j + D/2 partner in the high
# nibble), so no byte is ever moved alone. Per word, one asm block: a PRMT spreads bytes (0, 1) and (2, 3) into the
# two 16-bit lanes, a LOP3 per nibble makes the fp16 1024 + x (exponent 2^10, so the mantissa is x: the "magic
# number" conversion) from the low nibble (x = u) or the masked high nibble (x = 16 u, no shift), and one HSUB2
# removes the bias (exact). Each output register is an fp16 pair of adjacent channels, which is how Triton holds
# fp16 tensors, so splitting it into two fp16 values and joining them back compiles to nothing. ~10 instructions per
# 8 nibbles (+4 HFMA2 for keys), where per-element code costs ~2.3 per nibble (and I2F runs at 1/4 rate).
_PROLOGUE = """
.reg .b32 t, u, l0, l1, h0, h1, bias;
prmt.b32 t, $4, 0, 0x4140;
prmt.b32 u, $4, 0, 0x4342;
lop3.b32 l0, t, 0x000F000F, 0x64006400, 0xEA;
lop3.b32 l1, u, 0x000F000F, 0x64006400, 0xEA;
lop3.b32 h0, t, 0x00F000F0, 0x64006400, 0xEA;
lop3.b32 h1, u, 0x00F000F0, 0x64006400, 0xEA;
"""
# values: centred codes u - 8 and 16 (u - 8) (biases 1032, 1152); the per-token scale folds into p
_ASM_VALUES = tl.constexpr("{" + _PROLOGUE + """
mov.b32 bias, 0x64086408;
sub.f16x2 $0, l0, bias;
sub.f16x2 $1, l1, bias;
mov.b32 bias, 0x64806480;
sub.f16x2 $2, h0, bias;
sub.f16x2 $3, h1, bias;
}""")
# keys, dequantized: u s + z (low nibble), (16 u) (s / 16) + z (high nibble), one fp16 rounding each (u - 1024 and
# 16 u - 1024 are exact). Inputs $5..$12: (s, z) pairs of channels (4w, 4w+1), (4w+2, 4w+3), low then high half.
_ASM_KEYS = tl.constexpr("{" + _PROLOGUE + """
mov.b32 bias, 0x64006400;
sub.f16x2 l0, l0, bias;
sub.f16x2 l1, l1, bias;
sub.f16x2 h0, h0, bias;
sub.f16x2 h1, h1, bias;
fma.rn.f16x2 $0, l0, $5, $7;
fma.rn.f16x2 $1, l1, $6, $8;
fma.rn.f16x2 $2, h0, $9, $11;
fma.rn.f16x2 $3, h1, $10, $12;
}""")


@triton.jit
def _f16_pair(x):
    """int32 holding two fp16 (bits 0-15, 16-31) -> fp16 [..., 2]."""
    return tl.join(x.to(tl.int16).to(tl.float16, bitcast=True), (x >> 16).to(tl.int16).to(tl.float16, bitcast=True))


@triton.jit
def _tile(p01, p23):
    """Four fp16 pair tensors [R, BW] (int32 bits: channels (4w, 4w+1), (4w+2, 4w+3)) -> fp16 [R, 4 BW]."""
    R: tl.constexpr = p01.shape[0]
    C: tl.constexpr = 4 * p01.shape[1]
    return tl.reshape(tl.permute(tl.join(_f16_pair(p01), _f16_pair(p23)), (0, 1, 3, 2)), (R, C))


@triton.jit
def _u(w, k: tl.constexpr, HIGH: tl.constexpr):
    """fp32 nibble code of byte k of each word (interpreter path); the high nibble as 16 u."""
    b = (w >> (8 * k)) & 255
    return (b & 240).to(tl.float32) if HIGH else (b & 15).to(tl.float32)


@triton.jit
def _values_f16(w, USE_ASM: tl.constexpr):
    """int32 words [P, BW] -> centred value codes (u - 8, 16 (u - 8)) as exact fp16 [P, 4 BW] (channel = column)."""
    if USE_ASM:
        l01, l23, h01, h23 = tl.inline_asm_elementwise(
            _ASM_VALUES, "=r,=r,=r,=r,r", [w], dtype=(tl.int32,) * 4, is_pure=True, pack=1)
        return _tile(l01, l23), _tile(h01, h23)
    else:
        R: tl.constexpr = w.shape[0]
        C: tl.constexpr = 4 * w.shape[1]
        lo = tl.join(tl.join(_u(w, 0, False), _u(w, 1, False)), tl.join(_u(w, 2, False), _u(w, 3, False))) - 8.0
        hi = tl.join(tl.join(_u(w, 0, True), _u(w, 1, True)), tl.join(_u(w, 2, True), _u(w, 3, True))) - 128.0
        lo = tl.reshape(tl.permute(lo, (0, 1, 3, 2)), (R, C))
        hi = tl.reshape(tl.permute(hi, (0, 1, 3, 2)), (R, C))
        return lo.to(tl.float16), hi.to(tl.float16)


@triton.jit
def _keys_f16(w, s_lo, z_lo, s_hi, z_hi, USE_ASM: tl.constexpr):
    """int32 words [P, BW] + per-channel scale/zero as int32 fp16-pair tensors [BW, 2] (pairs (4w, 4w+1), (4w+2,
    4w+3); s_hi already divided by 16) -> dequantized keys (low half, high half) fp16 [P, 4 BW]."""
    sl01, sl23 = tl.split(s_lo)
    zl01, zl23 = tl.split(z_lo)
    sh01, sh23 = tl.split(s_hi)
    zh01, zh23 = tl.split(z_hi)
    if USE_ASM:
        l01, l23, h01, h23 = tl.inline_asm_elementwise(
            _ASM_KEYS, "=r,=r,=r,=r,r,r,r,r,r,r,r,r,r",
            [w, sl01[None, :], sl23[None, :], zl01[None, :], zl23[None, :],
             sh01[None, :], sh23[None, :], zh01[None, :], zh23[None, :]],
            dtype=(tl.int32,) * 4, is_pure=True, pack=1)
        return _tile(l01, l23), _tile(h01, h23)
    else:  # fp32 u s + z rounded once to fp16, as the fused f16x2 FMA does (up to a double rounding)
        R: tl.constexpr = w.shape[0]
        C: tl.constexpr = 4 * w.shape[1]
        s_l = tl.reshape(_f16_pair(s_lo), (C,)).to(tl.float32)
        z_l = tl.reshape(_f16_pair(z_lo), (C,)).to(tl.float32)
        s_h = tl.reshape(_f16_pair(s_hi), (C,)).to(tl.float32)
        z_h = tl.reshape(_f16_pair(z_hi), (C,)).to(tl.float32)
        lo = tl.join(tl.join(_u(w, 0, False), _u(w, 1, False)), tl.join(_u(w, 2, False), _u(w, 3, False)))
        hi = tl.join(tl.join(_u(w, 0, True), _u(w, 1, True)), tl.join(_u(w, 2, True), _u(w, 3, True)))
        lo = tl.reshape(tl.permute(lo, (0, 1, 3, 2)), (R, C))
        hi = tl.reshape(tl.permute(hi, (0, 1, 3, 2)), (R, C))
        return (lo * s_l[None, :] + z_l[None, :]).to(tl.float16), (hi * s_h[None, :] + z_h[None, :]).to(tl.float16)


@triton.jit
def _div16(x, USE_ASM: tl.constexpr):
    """int32 fp16 pairs -> the same pairs divided by 16 (exact unless subnormal)."""
    if USE_ASM:
        return tl.inline_asm_elementwise("{.reg .b32 c; mov.b32 c, 0x2C002C00; mul.rn.f16x2 $0, $1, c;}", "=r,r", [x], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:
        y = (_f16_pair(x).to(tl.float32) * 0.0625).to(tl.float16)  # [..., 2, 2]
        lo, hi = tl.split(y.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF)
        return lo | (hi << 16)


# ---- the wgmma A fragment's order (KF of verify_attention / draft_decode) --------------------------------------
def key_frag_fits(page_size: int, half: int, num_warps: int) -> bool:
    """Whether ``_key_frag`` / ``_tok_perm`` (which hard-code it) match the tile: 64-token pages, 64 channels a half
    (D = 128: 16 words a row, 4 lanes of 4 words) and one warpgroup of 4 warps on the tokens."""
    return page_size == 64 and half == 64 and num_warps == 4


@triton.jit
def _tok_perm(x):
    """Rows of a [64, C] page tile (or a [64] vector) reordered so row 16w + 8r + g holds token 32r + 8w + g: the
    rows warp w holds in the wgmma A fragment are the rows it loads (4 warps, 8 rows a warp a pass). Softmax and
    P·V sum over tokens, so any token order is the same attention as long as keys, values and value scales agree."""
    if len(x.shape) == 1:
        return tl.reshape(tl.permute(tl.reshape(x, (2, 4, 8)), (1, 0, 2)), (64,))
    else:
        C: tl.constexpr = x.shape[1]
        return tl.reshape(tl.permute(tl.reshape(x, (2, 4, 8, C)), (1, 0, 2, 3)), (64, C))


@triton.jit
def _key_frag(k):
    """Dequantized keys [64, 64] (channel = column) -> the same keys as the wgmma A fragment holds them: column
    16j + 8p + 2t + e is channel 16t + 4j + 2p + e (lane t of a row's 4 lanes loads words 4t..4t+3), rows in
    ``_tok_perm`` order. With Q^T loaded in this channel order (``key_frag_channels``) S^T is unchanged up to the
    order of the fp32 sums, and the tile reaches the MMA without a shared-memory round trip."""
    x = tl.reshape(tl.permute(tl.reshape(k, (64, 4, 4, 2, 2)), (0, 2, 3, 1, 4)), (64, 64))
    return _tok_perm(x)


@triton.jit
def key_frag_channels(BLOCK_DH: tl.constexpr):
    """Channel of each column of ``_key_frag``'s tile (Q^T's row order)."""
    kk = tl.arange(0, BLOCK_DH)
    return 16 * ((kk // 2) % 4) + 4 * (kk // 16) + 2 * ((kk // 8) % 2) + kk % 2
