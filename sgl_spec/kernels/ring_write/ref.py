"""Reference for ring_write: store the new tokens' K and V into the hot ring (pure torch).

``hot_k`` / ``hot_v``: [S, R, P, H, D] (slot, ring page, offset, KV head, channel); ``rows`` [T] int64: the flat
ring row ``(slot * R + ring) * P + offset`` of token t; ``k`` / ``v``: [T, H, D] (any float dtype; stored in the
ring's dtype). Rows may repeat only where the caller writes the same trash row (slot 0): the last write wins there,
as with an index_put, and that row is never read.
"""
from __future__ import annotations

import torch


def check(hot_k, hot_v, rows, k, v):
    assert hot_k.dim() == 5 and hot_v.shape == hot_k.shape, (hot_k.shape, hot_v.shape)
    assert hot_k.is_contiguous() and hot_v.is_contiguous(), "the ring must be contiguous"
    assert hot_v.dtype == hot_k.dtype
    H, D = hot_k.shape[-2:]
    T = rows.shape[0]
    assert rows.dim() == 1 and rows.dtype == torch.int64, (rows.shape, rows.dtype)
    assert k.shape == (T, H, D) and v.shape == (T, H, D), (k.shape, v.shape, (T, H, D))
    assert k.stride(-1) == 1 and v.stride(-1) == 1, "K/V channels must be contiguous"


def ring_write(hot_k, hot_v, rows, k, v):
    check(hot_k, hot_v, rows, k, v)
    H, D = hot_k.shape[-2:]
    hot_k.view(-1, H, D).index_copy_(0, rows, k.to(hot_k.dtype))
    hot_v.view(-1, H, D).index_copy_(0, rows, v.to(hot_v.dtype))
