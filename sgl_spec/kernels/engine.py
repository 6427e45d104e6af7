"""Which engine runs a kernel op: the Triton kernels for CUDA tensors, the pure-torch references elsewhere.

``SGL_SPEC_FORCE_REF=1`` (debugging only) forces the references everywhere.
"""
from __future__ import annotations

import os

import torch


def use_triton(t: torch.Tensor) -> bool:
    return t.is_cuda and os.environ.get("SGL_SPEC_FORCE_REF", "0") != "1"
