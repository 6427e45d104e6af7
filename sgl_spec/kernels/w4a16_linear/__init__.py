"""``w4a16_linear``: ``x @ w.T (+ bias)`` with w held as 4-bit codes and one scale per 128 input channels (the draft
passes' copy of the model's linear weights, sgl_spec/speculative/draft_weights.py); contract in docs/CONTRACTS.md.
The format and the pure-torch twin are ``ref.py``; the GPU engine is SGLang's Marlin GEMM (``marlin.py``), with our
split-K Triton kernel (``triton.py``) beside it. Which
engine runs is sgl_spec/kernels/engine.py's ``w4a16_engine``, decided when the weight is prepared."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from sgl_spec.kernels.w4a16_linear import ref
from sgl_spec.kernels.w4a16_linear.ref import GROUP, dequantize, quantize  # noqa: F401

# Marlin's tiles: N a multiple of 64, K of 128 (and of the group)
MARLIN_N, MARLIN_K = 64, 128


@dataclass
class W4Weight:
    """One linear layer's 4-bit copy: ref.py's format, and Marlin's layout where that engine runs."""
    qweight: torch.Tensor  # [K/8, N] int32
    scales: torch.Tensor  # [K/GROUP, N]
    n: int
    k: int
    marlin: Optional[object] = None  # marlin.MarlinWeight
    triton: Optional[object] = None  # triton.TritonWeight

    @property
    def nbytes(self) -> int:
        if self.marlin is not None:
            return self.marlin.qweight.nbytes + self.marlin.scales.nbytes + self.marlin.workspace.nbytes
        if self.triton is not None:
            return self.triton.nbytes
        return self.qweight.nbytes + self.scales.nbytes


def supported(n: int, k: int, engine: str) -> str:
    """'' where an [n, k] weight can take this engine, else why not."""
    if k % GROUP:
        return f"K = {k} is not a multiple of the group size {GROUP}"
    if engine == "marlin" and (n % MARLIN_N or k % MARLIN_K):
        return f"Marlin needs N % {MARLIN_N} == 0 and K % {MARLIN_K} == 0, got N = {n}, K = {k}"
    return ""


def prepare(w: torch.Tensor, engine: str) -> W4Weight:
    """The 4-bit copy of ``w [N, K]`` for ``engine`` ("marlin", "triton" or "torch"); w itself is left unchanged."""
    n, k = w.shape
    why = supported(n, k, engine)
    if why:
        raise ValueError(why)
    qweight, scales = ref.quantize(w)
    out = W4Weight(qweight, scales, n, k)
    if engine == "marlin":
        from sgl_spec.kernels.w4a16_linear import marlin

        out.marlin = marlin.prepare(qweight, scales)
        out.qweight, out.scales = qweight[:0], scales[:0]  # the Marlin layout is the copy kept on the device
    elif engine == "triton":
        from sgl_spec.kernels.w4a16_linear import triton as wt

        out.triton = wt.prepare(qweight, scales)
        out.qweight, out.scales = qweight[:0], scales[:0]
    return out


def w4a16_linear(x: torch.Tensor, w: W4Weight, bias: Optional[torch.Tensor] = None, out=None) -> torch.Tensor:
    """x [..., K] (bf16 / fp16, fp32 on the torch engine) -> [..., N] in x's dtype."""
    if x.shape[-1] != w.k:
        raise ValueError(f"x has {x.shape[-1]} input channels, the weight {w.k}")
    if out is not None and (out.shape != (*x.shape[:-1], w.n) or out.dtype != x.dtype):
        raise ValueError(f"out must be {(*x.shape[:-1], w.n)} {x.dtype}, got {tuple(out.shape)} {out.dtype}")
    if w.marlin is not None:
        from sgl_spec.kernels.w4a16_linear import marlin

        return marlin.w4a16_linear(x, w.marlin, bias, out)
    if w.triton is not None:
        from sgl_spec.kernels.w4a16_linear import triton as wt

        return wt.w4a16_linear(x, w.triton, bias, out)
    return ref.w4a16_linear(x, w.qweight, w.scales, bias, out)
