"""Fused decoder layers for draft passes: 7 kernels a Llama layer instead of 10.

A draft pass of a small model is a chain of ~85 dependent kernels, and in a CUDA graph each costs about its own
latency plus a launch gap, whatever its size (H200, pycode-30m 15k x 32: a 338 us pass; bench/NOTES_kernels.md
"Session 19"). So the draft passes of supported models run each decoder layer as

    add_rmsnorm_linear (input norm + qkv)  ->  rope  ->  attention (+ merge)  ->  o_proj
    add_rmsnorm_linear (post-attention norm + gate_up)  ->  silu_mul_linear (activation + down)

with the same weights, dropping the two norm kernels and the activation kernel (kernels/norm_linear.py,
kernels/act_linear.py). SGLang's modules still do rope, attention (our backend) and o_proj. The fused kernels
compute what SGLang's RMSNorm (forward_native semantics) and SiluAndMul compute, up to fp32 summation order, so a
draft token can differ from the unfused draft only on a near-tie; the verify pass runs SGLang's own layers, so output
stays lossless either way (the acceptance test decides, as for any draft).

Applied only where it is exact to do so (``unsupported`` says why not): Llama decoder layers, SGLang's plain RMSNorm,
SiLU-and-mul, unquantized bf16 / fp32 weights, tensor parallel size 1; and only to draft graphs captured for batch sizes
up to FUSED_MAX_BS (larger batches keep SGLang's layers: there cuBLAS's tiles beat these kernels,
bench/results/s19/dev_linear.json). ``fused(model)`` swaps the layers' forward inside a ``with`` block (an instance
attribute over the class method; restored on exit); ``fused_call`` wraps the forward a draft graph captures in it.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import types
from typing import Optional

import torch

logger = logging.getLogger(__name__)

FUSED_MAX_BS = 64
_LAYER_CLASSES = ("LlamaDecoderLayer",)


def _linear_issue(lin, name: str) -> Optional[str]:
    if type(getattr(lin, "quant_method", None)).__name__ != "UnquantizedLinearMethod":
        return f"{name} is quantized"
    if getattr(lin, "tp_size", 1) != 1:
        return f"{name} is tensor-parallel"
    if getattr(lin, "skip_bias_add", False):
        return f"{name} skips its bias add"
    w = getattr(lin, "weight", None)
    # not fp16: the fused norm rounds r * norm_weight before the row scale (kernels/norm_linear.py), and an
    # unnormalized residual stream can leave fp16's range
    if not isinstance(w, torch.Tensor) or w.dim() != 2 or w.stride(1) != 1 or w.dtype not in (torch.bfloat16,
                                                                                              torch.float32):
        return f"{name} has no contiguous bf16 / fp32 [N, K] weight"
    return None


def _norm_issue(norm, name: str) -> Optional[str]:
    if type(norm).__name__ != "RMSNorm":
        return f"{name} is {type(norm).__name__}, not RMSNorm"
    if (not getattr(norm, "has_weight", True) or getattr(norm, "cast_x_before_out_mul", False)
            or getattr(norm, "fp32_residual", False) or getattr(norm, "override_orig_dtype", None) is not None
            or getattr(norm, "variance_size_override", None) is not None):
        return f"{name} is not a plain RMSNorm"
    return None


def unsupported(model) -> Optional[str]:
    """Why the draft passes of ``model`` cannot use fused layers (None: they can)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or len(layers) == 0:
        return "the model has no model.layers"
    for i, layer in enumerate(layers):
        if type(layer).__name__ not in _LAYER_CLASSES:
            return f"layer {i} is {type(layer).__name__} (fused: {', '.join(_LAYER_CLASSES)})"
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        if attn is None or mlp is None or not all(hasattr(attn, a) for a in ("qkv_proj", "o_proj", "rotary_emb",
                                                                            "attn", "q_size", "kv_size")):
            return f"layer {i} does not have the Llama attention layout"
        if type(getattr(mlp, "act_fn", None)).__name__ != "SiluAndMul":
            return f"layer {i}'s activation is not SiluAndMul"
        for issue in (_norm_issue(getattr(layer, "input_layernorm", None), "input_layernorm"),
                      _norm_issue(getattr(layer, "post_attention_layernorm", None), "post_attention_layernorm"),
                      _linear_issue(attn.qkv_proj, "qkv_proj"),
                      _linear_issue(getattr(mlp, "gate_up_proj", None), "gate_up_proj"),
                      _linear_issue(getattr(mlp, "down_proj", None), "down_proj")):
            if issue:
                return f"layer {i}: {issue}"
    return None


def _fused_forward(self, positions, hidden_states, forward_batch, residual):
    """LlamaDecoderLayer.forward with the norms and the activation inside the GEMMs (same inputs and outputs)."""
    from sgl_spec import ops

    if hidden_states.dim() != 2 or hidden_states.shape[0] > ops.FUSED_LINEAR_MAX_M:
        return type(self).forward(self, positions, hidden_states, forward_batch, residual)
    attn, mlp = self.self_attn, self.mlp
    ln1, ln2 = self.input_layernorm, self.post_attention_layernorm
    qkv, residual = ops.add_rmsnorm_linear(hidden_states.contiguous(), residual, ln1.weight, ln1.variance_epsilon,
                                           attn.qkv_proj.weight, attn.qkv_proj.bias)
    q, k, v = qkv.split([attn.q_size, attn.kv_size, attn.kv_size], dim=-1)
    q, k = attn.rotary_emb(positions, q, k)
    h, _ = attn.o_proj(attn.attn(q, k, v, forward_batch))
    gu, residual = ops.add_rmsnorm_linear(h.contiguous(), residual, ln2.weight, ln2.variance_epsilon,
                                          mlp.gate_up_proj.weight, mlp.gate_up_proj.bias)
    return ops.silu_mul_linear(gu, mlp.down_proj.weight, mlp.down_proj.bias), residual


@contextlib.contextmanager
def fused(model, enabled: bool = True):
    """Inside the block, the decoder layers of ``model`` run ``_fused_forward`` (when ``enabled`` and supported)."""
    layers = list(model.model.layers) if enabled else []
    for layer in layers:
        layer.forward = types.MethodType(_fused_forward, layer)
    try:
        yield bool(layers)
    finally:
        for layer in layers:
            layer.__dict__.pop("forward", None)


def fused_call(model, forward):
    """``forward`` (a model forward) running inside ``fused(model)`` at every call: a graph capture records the fused
    kernels; the eager stand-in of a graph (SGL_SPEC_DRAFT_GRAPHS=eager) runs them at each replay. The signature is
    kept (SGLang inspects the forward's parameters)."""
    @functools.wraps(forward)
    def call(*args, **kwargs):
        with fused(model):
            return forward(*args, **kwargs)
    return call


def resolve(model, requested: bool) -> bool:
    """Whether draft graphs use fused layers: ``requested`` (--quantspec-fused-draft) and supported; logs why not."""
    if not requested:
        return False
    why = unsupported(model)
    if why:
        logger.info("quantspec: draft passes keep SGLang's layers (%s)", why)
        return False
    logger.info("quantspec: draft passes fuse the norms and the activation into the GEMMs (batch <= %d)",
                FUSED_MAX_BS)
    return True
