"""Hierarchical INT4/INT4 ("nibble-plane") KV page format.

Every KV page of ``P`` tokens (P = quantization group = SGLang page size; 32, 64 or 128) and every KV head stores an
INT8 code per element split into two 4-bit planes, following QuantSpec (Tiwari et al., 2025, §4.2):

* **upper nibble** ``u`` - asymmetric round-to-nearest with step ``s`` and offset ``z``::

      u = clamp(floor((x - z) / s + 1/2), 0, 15)

* **lower nibble** ``l`` - the residual ``r = x - (z + s*u)`` (|r| <= s/2) quantized *symmetrically* with step ``s/16``.
  We use a mid-rise quantizer (levels at ±0.5, ±1.5, …, ±7.5 steps) so that its 16 levels cover the whole residual
  range [-s/2, s/2] with error <= s/32; a mid-tread quantizer (levels -8..7) would need 17 levels to do that::

      l = clamp(floor(r / (s/16)), -8, 7)          stored as the unsigned nibble  l + 8

* **views**::

      draft  (upper plane only):  x ≈ z + s*u                                  |err| <= s/2
      target (INT8, both planes): x ≈ z + s*u + (s/16)*(l + 1/2)
                                    = z + (s/16) * (c - 7.5),  c = 16*u + (l+8) in [0, 255]   |err| <= s/32

  So the target view is an ordinary asymmetric 8-bit quantizer whose high nibble is the 4-bit RTN code: a kernel can
  rebuild ``c`` from the two bytes with one shift-or and dequantize with one FMA.

* **groups** (KIVI / QuantSpec): keys per *channel* over the page's P tokens (scale/zero shape ``[H, D]`` per page);
  values per *token* over head_dim (scale/zero shape ``[H, P]`` per page).
* **scales/zeros** are stored in fp16 (whatever the model dtype). So that the error bounds hold against the *stored*
  values, ``z`` is rounded **down** to fp16 (z <= min) and ``s`` is rounded **up** (z + 15*s >= max). A constant group
  gets s = 0, u = l = 0 and is reproduced exactly (when x is representable in fp16).

Byte layout, per layer (page id = SGLang slot // P)::

    k_upper, k_lower, v_upper, v_lower : uint8 [num_pages, H, P, D/2]
        byte (page, h, n, j) = code[n, j] | (code[n, j + D/2] << 4)   (channel j low nibble, j + D/2 high nibble)
    k_scale, k_zero : fp16 [num_pages, H, D]     (per channel over the page)
    v_scale, v_zero : fp16 [num_pages, H, P]     (per token)

Packing channel j with channel j + D/2 (instead of 2j with 2j+1) lets a kernel split a loaded byte tile into the two
contiguous halves of the head dimension and multiply them with the two contiguous halves of q (or of the output).
The two planes are separate tensors so a draft pass never touches the lower plane's bytes.

Bits per element, with ``S`` = 16 bits of scale + 16 bits of zero:
    keys   : draft reads 4 + 2*16/P, storage 8 + 2*16/P        (P=64: 4.5 / 8.5)
    values : draft reads 4 + 2*16/D, storage 8 + 2*16/D        (D=128: 4.25 / 8.25)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

SUPPORTED_PAGE_SIZES = (32, 64, 128)
SCALE_DTYPE = torch.float16


@dataclass(frozen=True)
class KVFormat:
    page_size: int
    num_kv_heads: int
    head_dim: int

    def __post_init__(self):
        if self.page_size not in SUPPORTED_PAGE_SIZES:
            raise ValueError(
                f"quantspec page size (quantization group) must be one of {SUPPORTED_PAGE_SIZES}, got {self.page_size}"
            )
        if self.head_dim % 2 or self.head_dim < 16:
            raise ValueError(f"quantspec needs an even head_dim >= 16, got {self.head_dim}")

    # ---- shapes --------------------------------------------------------------------------------------------------
    def plane_shape(self, num_pages: int) -> tuple[int, ...]:
        return (num_pages, self.num_kv_heads, self.page_size, self.head_dim // 2)

    def k_scale_shape(self, num_pages: int) -> tuple[int, ...]:
        return (num_pages, self.num_kv_heads, self.head_dim)

    def v_scale_shape(self, num_pages: int) -> tuple[int, ...]:
        return (num_pages, self.num_kv_heads, self.page_size)

    # ---- accounting ----------------------------------------------------------------------------------------------
    def bits_per_element(self, draft: bool = False) -> tuple[float, float]:
        """(key bits, value bits) per element: what is stored, or what a draft pass reads."""
        plane_bits = 4 if draft else 8
        return plane_bits + 32 / self.page_size, plane_bits + 32 / self.head_dim

    def bytes_per_token_per_layer(self, draft: bool = False) -> float:
        kb, vb = self.bits_per_element(draft)
        return (kb + vb) * self.num_kv_heads * self.head_dim / 8

    def alloc(self, num_pages: int, device="cpu") -> "PageStore":
        planes = [torch.zeros(self.plane_shape(num_pages), dtype=torch.uint8, device=device) for _ in range(4)]
        ks, kz = (torch.zeros(self.k_scale_shape(num_pages), dtype=SCALE_DTYPE, device=device) for _ in range(2))
        vs, vz = (torch.zeros(self.v_scale_shape(num_pages), dtype=SCALE_DTYPE, device=device) for _ in range(2))
        return PageStore(*planes, ks, kz, vs, vz)


@dataclass
class PageStore:
    """The quantized pages of one layer (tensors are views into the pool; see module docstring for the layout)."""

    k_upper: torch.Tensor
    k_lower: torch.Tensor
    v_upper: torch.Tensor
    v_lower: torch.Tensor
    k_scale: torch.Tensor
    k_zero: torch.Tensor
    v_scale: torch.Tensor
    v_zero: torch.Tensor


# ---- nibble packing (bit-exact, shared by refs and tests) ----------------------------------------------------------
def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """codes uint8 [..., D] with values in [0, 15] -> bytes uint8 [..., D/2] (channel j low, j + D/2 high)."""
    half = codes.shape[-1] // 2
    return (codes[..., :half] | (codes[..., half:] << 4)).to(torch.uint8)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """bytes uint8 [..., D/2] -> codes uint8 [..., D]."""
    return torch.cat([packed & 0xF, packed >> 4], dim=-1)


# ---- fp16 rounding in a given direction (so error bounds hold against the stored values) ---------------------------
_FP16_MAX = 65504.0


def fp16_round_down(x: torch.Tensor) -> torch.Tensor:
    """Largest fp16 value <= x (x fp32), saturating at the fp16 range."""
    xc = x.clamp(-_FP16_MAX, _FP16_MAX)  # compare with the clamped value, else x < -65504 steps to -inf
    h = xc.to(torch.float16)
    return torch.where(h.float() > xc, torch.nextafter(h, torch.full_like(h, -float("inf"))), h)


def fp16_round_up(x: torch.Tensor) -> torch.Tensor:
    """Smallest fp16 value >= x (x fp32), saturating at the fp16 range."""
    xc = x.clamp(-_FP16_MAX, _FP16_MAX)  # compare with the clamped value, else x > 65504 steps to +inf
    h = xc.to(torch.float16)
    return torch.where(h.float() < xc, torch.nextafter(h, torch.full_like(h, float("inf"))), h)
