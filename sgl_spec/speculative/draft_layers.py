"""Fused decoder layers for draft passes: 6 kernels a Llama layer instead of 10.

A draft pass of a small model is a chain of ~85 dependent kernels, and in a CUDA graph each costs about its own
latency plus a launch gap, whatever its size (H200, pycode-30m 15k x 32: a 338 us pass). So the draft passes of supported models run each decoder layer as

    norm_pair_linear(input norm + qkv + rope)  ->  attention (+ merge)  ->  o_proj
    norm_pair_linear(post-attention norm + gate_up + silu_mul)  ->  down_proj

(sgl_spec/kernels/norm_pair_linear/triton.py), dropping SGLang's two norm kernels, the rope kernel and the activation kernel. The
kernel reads the norm weight folded into a copy of the qkv and gate_up weights (``prescaled``: W diag(g), built once
when the draft graphs are captured), which is why only models whose copy stays under MAX_PRESCALED_BYTES get fused
layers. The result equals SGLang's layers up to rounding (ref twin: sgl_spec/kernels/norm_pair_linear/ref.py); the verify pass
runs SGLang's own layers, so output stays lossless either way (the acceptance test decides, as for any draft). The copy
is not refreshed by a weight update (SGLang's update_weights_* APIs): drafts would then come from the old weights,
which costs acceptance, never correctness.

Applied only where it computes SGLang's layer (``unsupported`` says why not): Llama decoder layers, SGLang's plain
RMSNorm, SiLU-and-mul, NeoX RoPE over the whole head dim, unquantized bias-free bf16 / fp16 / fp32 weights, tensor
parallel size 1; and only to draft graphs captured for batch sizes up to FUSED_MAX_BS (on an H100 the fused layers
were faster up to 64 rows and even at 128). ``fused(model)`` swaps the layers' forward inside a ``with`` block (an instance attribute
over the class method; restored on exit); ``fused_call`` wraps the forward a draft graph captures in it.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import types
from typing import Optional

import torch

from sgl_spec.patches import sglang

logger = logging.getLogger(__name__)

FUSED_MAX_BS = 64
MAX_PRESCALED_BYTES = 256 << 20  # the folded copies of qkv and gate_up (pycode-30m: 32 MB; Llama-3-8B would be 9 GB)
_LAYER_CLASSES = ("LlamaDecoderLayer",)
_ATTR = "_quantspec_prescaled"  # per layer: (qkv W diag(g1), gate_up W diag(g2))


def _linear_issue(lin, name: str) -> Optional[str]:
    if type(getattr(lin, "quant_method", None)).__name__ != "UnquantizedLinearMethod":
        return f"{name} is quantized"
    if getattr(lin, "tp_size", 1) != 1:
        return f"{name} is tensor-parallel"
    if getattr(lin, "bias", None) is not None:
        return f"{name} has a bias"
    w = getattr(lin, "weight", None)
    if not isinstance(w, torch.Tensor) or w.dim() != 2 or w.stride(1) != 1 or w.dtype not in (
            torch.bfloat16, torch.float16, torch.float32):
        return f"{name} has no contiguous 16/32-bit [N, K] weight"
    return None


def _norm_issue(norm, name: str) -> Optional[str]:
    if type(norm).__name__ != "RMSNorm":
        return f"{name} is {type(norm).__name__}, not RMSNorm"
    if (not getattr(norm, "has_weight", True) or getattr(norm, "cast_x_before_out_mul", False)
            or getattr(norm, "fp32_residual", False) or getattr(norm, "override_orig_dtype", None) is not None
            or getattr(norm, "variance_size_override", None) is not None):
        return f"{name} is not a plain RMSNorm"
    return None


def _rope_issue(attn) -> Optional[str]:
    rot = attn.rotary_emb
    cs = getattr(rot, "cos_sin_cache", None)
    hd = getattr(attn, "head_dim", None)
    if not getattr(rot, "is_neox_style", False):
        return "its rotary embedding is not NeoX-style"
    if getattr(rot, "rotary_dim", None) != hd or getattr(rot, "head_size", None) != hd or not hd or hd % 16:
        return "its rotary embedding does not cover the whole head dim (a multiple of 16)"
    if not isinstance(cs, torch.Tensor) or cs.dim() != 2 or cs.shape[1] != hd:
        return "its rotary embedding has no [positions, head_dim] cos_sin_cache"
    # subclasses that only precompute another cache (Llama-3 scaling, linear scaling) rotate the same way
    base = [c for c in type(rot).__mro__ if c.__name__ == "RotaryEmbedding"]
    if not base or any(getattr(type(rot), m) is not getattr(base[0], m) for m in ("forward_cuda", "forward_native")):
        return f"its rotary embedding is {type(rot).__name__}, which rotates its own way"
    return None


def unsupported(model) -> Optional[str]:
    """Why the draft passes of ``model`` cannot use fused layers (None: they can)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or len(layers) == 0:
        return "the model has no model.layers"
    why = sglang().FUSED_DRAFT_LAYERS_UNSUPPORTED
    if why:
        return why
    extra = 0
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
                      _rope_issue(attn)):
            if issue:
                return f"layer {i}: {issue}"
        if attn.qkv_proj.weight.shape[0] != attn.q_size + 2 * attn.kv_size:
            return f"layer {i}: qkv_proj does not hold q, k and v of this rank"
        extra += sum(w.numel() * w.element_size() for w in (attn.qkv_proj.weight, mlp.gate_up_proj.weight))
    if extra > MAX_PRESCALED_BYTES:
        return (f"the folded qkv / gate_up copies would take {extra / 2 ** 20:.0f} MiB (at most "
                f"{MAX_PRESCALED_BYTES >> 20} MiB; a model this size is not launch-bound)")
    return None


def prescaled(layer):
    """(qkv W diag(g_in), gate_up W diag(g_post)) of ``layer``, built on first use (one rounding to the weights'
    dtype) and kept on the layer."""
    got = getattr(layer, _ATTR, None)
    if got is None:
        def fold(w, g):
            return (w.float() * g.float()[None, :]).to(w.dtype).contiguous()
        got = (fold(layer.self_attn.qkv_proj.weight, layer.input_layernorm.weight),
               fold(layer.mlp.gate_up_proj.weight, layer.post_attention_layernorm.weight))
        object.__setattr__(layer, _ATTR, got)  # a plain attribute: not a parameter / buffer of the module
    return got


def _fused_forward(self, positions, hidden_states, forward_batch, residual):
    """LlamaDecoderLayer.forward as two norm_pair_linear launches around attention and o_proj (same inputs and
    outputs)."""
    from sgl_spec.kernels.norm_pair_linear import norm_pair_linear

    if hidden_states.dim() != 2 or hidden_states.shape[0] > FUSED_MAX_BS:
        return type(self).forward(self, positions, hidden_states, forward_batch, residual)
    attn, mlp = self.self_attn, self.mlp
    w_qkv, w_gu = prescaled(self)
    rot = attn.rotary_emb
    qkv, residual = norm_pair_linear(
        hidden_states.contiguous(), residual, w_qkv, self.input_layernorm.variance_epsilon, "rope",
        positions=positions, cos_sin=rot.cos_sin_cache, head_dim=attn.head_dim,
        rot_heads=(attn.q_size + attn.kv_size) // attn.head_dim)
    q, k, v = qkv.split([attn.q_size, attn.kv_size, attn.kv_size], dim=-1)
    h, _ = attn.o_proj(attn.attn(q, k, v, forward_batch))
    act, residual = norm_pair_linear(h.contiguous(), residual, w_gu,
                                         self.post_attention_layernorm.variance_epsilon, "silu_mul")
    out, _ = mlp.down_proj(act)
    return out, residual


@contextlib.contextmanager
def fused(model, enabled: bool = True):
    """Inside the block, the decoder layers of ``model`` run ``_fused_forward`` (when ``enabled``). Re-entrant: on exit
    each layer gets back the forward it had on entry (a graph capture's ``fused_call`` inside the worker's draft
    block must not drop the outer swap)."""
    layers = list(model.model.layers) if enabled else []
    saved = [layer.__dict__.get("forward") for layer in layers]
    for layer in layers:
        layer.forward = types.MethodType(_fused_forward, layer)
    try:
        yield bool(layers)
    finally:
        for layer, prev in zip(layers, saved):
            if prev is None:
                layer.__dict__.pop("forward", None)
            else:
                layer.forward = prev


def fused_call(model, forward):
    """``forward`` (a model forward) running inside ``fused(model)`` at every call: a graph capture records the fused
    kernels; the eager stand-in of a graph (SGL_SPEC_DRAFT_GRAPHS=eager) runs them at each replay. The signature is
    kept (SGLang inspects the forward's parameters)."""
    @functools.wraps(forward)
    def call(*args, **kwargs):
        with fused(model):
            return forward(*args, **kwargs)
    return call


def resolve(model, requested: bool, int4_weights: bool = False) -> bool:
    """Whether draft graphs use fused layers: ``requested`` (--quantspec-fused-draft) and supported; logs why not.
    Builds the folded weights of every layer when they are used. With 4-bit draft weights (draft_weights.py) the
    drafts keep SGLang's layers: the fused launches read the checkpoint's qkv and gate_up weights."""
    if not requested:
        return False
    why = "the drafts read 4-bit weights" if int4_weights else unsupported(model)
    if why:
        logger.info("quantspec: draft passes keep SGLang's layers (%s)", why)
        return False
    for layer in model.model.layers:
        prescaled(layer)
    logger.info("quantspec: draft passes fuse norm + qkv + rope and norm + gate_up + silu_mul (batch <= %d)",
                FUSED_MAX_BS)
    return True
