"""Kernel dispatch: Triton kernels for CUDA tensors, the pure-torch references on CPU.

``SGL_SPEC_FORCE_REF=1`` (debugging only) forces the references everywhere.
"""
from __future__ import annotations

import importlib
import os

import torch

_OPS = ("quantize_pages", "draft_decode", "verify_attention", "select_topk_pages", "ring_write", "window_meta",
        "argmax_rows", "norm_pair_linear")


def _use_triton(t: torch.Tensor) -> bool:
    return t.is_cuda and os.environ.get("SGL_SPEC_FORCE_REF", "0") != "1"


def _impl(name: str, use_triton: bool):
    mod = importlib.import_module(f"sgl_spec.kernels.{name}" if use_triton else f"sgl_spec.kernels.{name}_ref")
    return getattr(mod, name)


def quantize_pages(src_k, *args, **kw):
    return _impl("quantize_pages", _use_triton(src_k))(src_k, *args, **kw)


def draft_decode(q, *args, **kw):
    return _impl("draft_decode", _use_triton(q))(q, *args, **kw)


def verify_attention(q, *args, **kw):
    return _impl("verify_attention", _use_triton(q))(q, *args, **kw)


def select_topk_pages(scores, num_eligible, *args, **kw):
    # scores may be None (score-free selection: streaming pages), num_eligible never is
    return _impl("select_topk_pages", _use_triton(num_eligible))(scores, num_eligible, *args, **kw)


def ring_write(hot_k, *args, **kw):
    return _impl("ring_write", _use_triton(hot_k))(hot_k, *args, **kw)


def window_meta(positions, *args, **kw):
    return _impl("window_meta", _use_triton(positions))(positions, *args, **kw)


def argmax_rows(x, out=None):
    return _impl("argmax_rows", _use_triton(x))(x, out=out)


def norm_pair_linear(x, *args, **kw):
    return _impl("norm_pair_linear", _use_triton(x))(x, *args, **kw)
