"""Paged KV tensors as the 2D rows that a TMA descriptor addresses (the Gluon kernels' TMA copies: the draft's page
ring, sgl_spec/kernels/draft_decode/gluon_stream.py, and the verify's copy warp, sgl_spec/kernels/verify_attention/gluon_copy_warp.py).

A plane or scale tensor [pages, H, ...] whose pages and heads start at whole rows of ``width`` elements is one 2D
tensor [rows, width] (row stride ``width``) from its first element to its last, whatever lies between (a contiguous
tensor: its own rows; the packed scale layout: the other three scale tensors too); page p, head h start at row
p * stride(0) / width + h * stride(1) / width. Host code only.
"""
from __future__ import annotations

import torch


def rows_ok(t: torch.Tensor, width: int) -> bool:
    """Whether ``t`` [pages, H, ..., width-multiple] can be addressed as rows of ``width`` elements: the last
    dimensions dense rows, page and head strides whole rows, 16-byte aligned."""
    inner = t[0, 0] if t.dim() > 2 else t
    return (t.stride(-1) == 1 and t.shape[-1] % width == 0 and (inner.dim() == 1 or inner.is_contiguous())
            and t.stride(0) % width == 0 and t.stride(1) % width == 0 and t.data_ptr() % 16 == 0
            and width * t.element_size() % 16 == 0)


def as_rows(t: torch.Tensor, width: int) -> torch.Tensor:
    """``t`` [pages, H, ...] as rows of ``width`` elements (check ``rows_ok`` first)."""
    span = sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1
    return torch.as_strided(t, (-(-span // width), width), (width, 1))


def row_strides(t: torch.Tensor, width: int) -> tuple[int, int]:
    """Rows a page, rows a head of ``t`` as ``as_rows`` addresses it."""
    return t.stride(0) // width, t.stride(1) // width
