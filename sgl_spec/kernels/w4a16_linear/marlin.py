"""``w4a16_linear``, GPU engine: SGLang's own Marlin W4A16 GEMM (``gptq_marlin_gemm`` through
``marlin_utils.apply_gptq_marlin_linear``, the kernel SGLang runs for GPTQ checkpoints), on the format of ref.py
repacked once into Marlin's tile layout (``gptq_marlin_repack``, scales through ``marlin_permute_scales``)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from sgl_spec.kernels.w4a16_linear.ref import GROUP


@dataclass
class MarlinWeight:
    qweight: torch.Tensor  # Marlin tiles, int32
    scales: torch.Tensor  # permuted, the activations' dtype
    workspace: torch.Tensor
    g_idx: torch.Tensor  # empty: no activation order
    perm: torch.Tensor  # empty
    n: int
    k: int


def prepare(qweight: torch.Tensor, scales: torch.Tensor) -> MarlinWeight:
    """ref.py's (qweight [K/8, N] int32, scales [K/GROUP, N]) on a CUDA device -> Marlin's layout."""
    from sglang.kernels.ops.quantization.gptq_marlin_repack import gptq_marlin_repack
    from sglang.srt.layers.quantization.marlin_utils import (marlin_make_empty_g_idx, marlin_make_workspace,
                                                             marlin_permute_scales)

    K, N = qweight.shape[0] * 8, qweight.shape[1]
    dev = qweight.device
    empty = marlin_make_empty_g_idx(dev)
    tiles = gptq_marlin_repack(qweight.contiguous(), perm=empty, size_k=K, size_n=N, num_bits=4)
    s = marlin_permute_scales(scales.contiguous(), size_k=K, size_n=N, group_size=GROUP)
    return MarlinWeight(tiles, s, marlin_make_workspace(dev), empty, marlin_make_empty_g_idx(dev), N, K)


def w4a16_linear(x: torch.Tensor, w: MarlinWeight, bias=None, out=None):
    from sglang.srt.layers.quantization.marlin_utils import apply_gptq_marlin_linear
    from sglang.srt.layers.quantization.utils import get_scalar_types

    _, scalar_types = get_scalar_types()
    y = apply_gptq_marlin_linear(x, w.qweight, w.scales, w.g_idx, w.g_idx, w.perm, w.workspace, scalar_types.uint4b8,
                                 output_size_per_partition=w.n, input_size_per_partition=w.k, is_k_full=True,
                                 bias=bias)
    if out is None:
        return y
    return out.copy_(y)
