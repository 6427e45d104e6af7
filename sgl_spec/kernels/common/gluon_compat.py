"""Gluon names that differ between supported Tritons: each picked once by what the installed Triton has, not its version."""
from __future__ import annotations

from triton.experimental.gluon import language as gl

# CTA-wide execution barrier with shared-memory visibility (bar.sync 0, __syncthreads): gl.barrier() where Triton has
# it (cluster=False, the default, is this barrier), else gl.thread_barrier(); both emit the same op.
cta_barrier = gl.barrier if hasattr(gl, "barrier") else gl.thread_barrier

__all__ = ["cta_barrier"]
