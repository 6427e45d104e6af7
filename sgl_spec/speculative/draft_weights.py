"""4-bit draft weights (QuantSpec's W4A16): draft passes read a 4-bit copy of the linear weights, verify passes
and plain steps the checkpoint's.

A self-speculative draft pass reads every linear weight of the model: on an 8B model that is 16 GB of BF16 a pass,
which makes a draft cost most of a stock step. With ``--quantspec-draft-weights int4`` (and ``auto`` where it pays,
``resolve``) each decoder layer's qkv, o, gate_up and down projections get a copy in sgl_spec/kernels/w4a16_linear's
format (4-bit codes, one scale per 128 input channels, about 0.27 of the BF16 bytes), built once before SGLang sizes
the KV pool so the copy's bytes come out of the KV budget (plugin.py's ``_profile_available_bytes`` hook). Inside
``int4(model)`` those linears compute with the copy; the verify outside it uses the checkpoint, so output is
unchanged (drafts only propose tokens; acceptance is what the copy costs). Not copied: the embedding and lm_head
(kept in the checkpoint's dtype), linears of a quantized checkpoint (they draft with their own weights), and
shapes the GEMM does not take (logged).

The copy is taken from the weights at startup; SGLang's weight-update APIs do not refresh it (drafts would then
come from the old weights: acceptance, never correctness).
"""
from __future__ import annotations

import contextlib
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Optional

import torch

from sgl_spec.kernels import w4a16_linear as w4

logger = logging.getLogger(__name__)

LINEARS = (("self_attn", "qkv_proj"), ("self_attn", "o_proj"), ("mlp", "gate_up_proj"), ("mlp", "down_proj"))
# auto: the copy where the draft-read linear weights are at least this large. Below, a draft pass is bound by its
# kernel count, not its weight bytes (pycode-30m: 29 MB of weights, a 338 µs pass on an H200), and the fused draft
# layers (which read the checkpoint's weights) are worth more than fewer bytes.
AUTO_MIN_BYTES = 1 << 30
_ATTR = "_quantspec_w4"  # per linear: its W4Weight


@dataclass
class DraftWeights:
    engine: str
    linears: list = field(default_factory=list)  # the modules with a copy
    skipped: list = field(default_factory=list)  # (name, why)
    nbytes: int = 0


def _linears(model):
    for i, layer in enumerate(getattr(getattr(model, "model", None), "layers", None) or []):
        for parent, name in LINEARS:
            lin = getattr(getattr(layer, parent, None), name, None)
            if lin is not None:
                yield f"layers.{i}.{parent}.{name}", lin


def _issue(lin) -> str:
    if type(getattr(lin, "quant_method", None)).__name__ != "UnquantizedLinearMethod":
        return "quantized in the checkpoint: drafts with its own weights"
    w = getattr(lin, "weight", None)
    if not isinstance(w, torch.Tensor) or w.dim() != 2:
        return "no [N, K] weight"
    return ""


def linear_bytes(model) -> int:
    """Bytes of the unquantized weights a draft pass reads through ``LINEARS``."""
    return sum(lin.weight.nbytes for _, lin in _linears(model) if not _issue(lin))


def resolve(requested: str, model, device) -> tuple[bool, str]:
    """(copy or not, why) for --quantspec-draft-weights ``requested`` ("auto" / "int4" / "model")."""
    if requested == "model":
        return False, "--quantspec-draft-weights model"
    engine, why_not = w4a16_engine(device)
    if requested == "int4":
        return True, "--quantspec-draft-weights int4" + (f" (pure-torch GEMM: {why_not})" if why_not else "")
    if why_not:
        return False, f"auto: no 4-bit GEMM here ({why_not})"
    size = linear_bytes(model)
    if size < AUTO_MIN_BYTES:
        return False, f"auto: {size / 2**30:.2f} GiB of linear weights, below {AUTO_MIN_BYTES / 2**30:.0f} GiB"
    return True, f"auto: {size / 2**30:.2f} GiB of linear weights"


def w4a16_engine(device):
    from sgl_spec.kernels.engine import w4a16_engine as choose

    return choose(device)


def prepare(model, device) -> DraftWeights:
    """Build the 4-bit copy of every draft-read linear of ``model`` (kept on each module); returns what was done."""
    engine, _ = w4a16_engine(device)
    out = DraftWeights(engine)
    with torch.no_grad():
        for name, lin in _linears(model):
            why = _issue(lin) or w4.supported(*lin.weight.shape, engine)
            if why:
                out.skipped.append((name, why))
                continue
            copy = w4.prepare(lin.weight.data, engine)
            object.__setattr__(lin, _ATTR, copy)  # a plain attribute: not a parameter / buffer of the module
            out.linears.append(lin)
            out.nbytes += copy.nbytes
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
    if engine == "marlin" and out.linears:
        _load_gemm(out.linears[0])
    logger.info("quantspec: 4-bit draft weights (%s GEMM) for %d linear layers, %.3f GB (the checkpoint's: %.3f GB)%s",
                engine, len(out.linears), out.nbytes / 2**30,
                sum(lin.weight.nbytes for lin in out.linears) / 2**30,
                f"; kept in the checkpoint's weights: {len(out.skipped)} ({out.skipped[0][1]})" if out.skipped else "")
    return out


def _load_gemm(lin) -> None:
    """One GEMM at load: SGLang builds its Marlin kernel on first use (a JIT compile on a machine's first start,
    about 5 minutes on an H200; later starts load it from the cache). Here the wait is logged and happens before
    the KV pool and the CUDA graphs, not silently inside a draft graph's capture."""
    logger.info("quantspec: loading SGLang's Marlin W4A16 GEMM (its first start on a machine compiles it: minutes)")
    t0 = time.perf_counter()
    with torch.no_grad():
        x = torch.zeros((1, lin.weight.shape[1]), dtype=lin.weight.dtype, device=lin.weight.device)
        w4.w4a16_linear(x, getattr(lin, _ATTR))
        torch.cuda.synchronize(lin.weight.device)
    logger.info("quantspec: Marlin W4A16 GEMM ready in %.1f s", time.perf_counter() - t0)


class _Int4Method:
    """A linear's quant method inside ``int4``: the 4-bit copy (SGLang calls ``quant_method.apply(layer, x, bias)``)."""

    def __init__(self, original):
        self.original = original

    def apply(self, layer, x, bias=None):
        return w4.w4a16_linear(x, getattr(layer, _ATTR), bias)

    def __getattr__(self, name):  # anything else SGLang asks of the method: the original's
        return getattr(self.original, name)


def has_copy(model) -> bool:
    return any(hasattr(lin, _ATTR) for _, lin in _linears(model))


@contextlib.contextmanager
def int4(model, enabled: bool = True):
    """Inside the block the copied linears of ``model`` compute with their 4-bit copy. Re-entrant: on exit each
    linear gets back the method it had on entry. Llama MLPs that would run SGLang's fused dual GEMM on the
    checkpoint's gate_up weight take the plain gate_up path inside the block."""
    saved = []
    if enabled:
        for _, lin in _linears(model):
            if hasattr(lin, _ATTR) and not isinstance(lin.quant_method, _Int4Method):
                saved.append((lin, "quant_method", lin.quant_method))
                lin.quant_method = _Int4Method(lin.quant_method)
        for layer in getattr(model.model, "layers", []):
            dual = getattr(getattr(layer, "mlp", None), "dual_gemm", None)
            if dual is not None and getattr(dual, "mode", None) is not None and hasattr(layer.mlp.gate_up_proj, _ATTR):
                saved.append((dual, "mode", dual.mode))
                dual.mode = None
    try:
        yield bool(saved)
    finally:
        for obj, attr, prev in reversed(saved):
            setattr(obj, attr, prev)


def int4_call(model, forward):
    """``forward`` (a model forward) running inside ``int4(model)`` at every call: a draft graph's capture records
    the 4-bit GEMMs. The signature is kept (SGLang inspects the forward's parameters)."""
    @functools.wraps(forward)
    def call(*args, **kwargs):
        with int4(model):
            return forward(*args, **kwargs)
    return call


def copy_of(lin) -> Optional[w4.W4Weight]:
    return getattr(lin, _ATTR, None)
