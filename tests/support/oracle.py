"""Independent references for quantspec's output, computed with Hugging Face transformers (no sgl_spec backend code):

* the **INT8-view teacher-forcing oracle** (docs/CONTRACTS.md "The attention view"): a custom HF attention function
  quantizes every complete page of the post-rope keys/values with the reference quantizer; query ``p`` reads pages
  ``j < p // P`` through the INT8 view and its own page in full precision. Greedy quantspec output (speculative or
  not) must be the argmax of this model re-scoring the final sequence.
* **plain attention** (the unquantized model, fp32 or bf16): what quantspec is *not* identical to. Used only to
  measure how often the INT8 view's greedy choice agrees with it.

Also: where the reference model pycode-30m lives.
"""
from __future__ import annotations

import functools
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]


def pycode_model_dir() -> Path:
    """pycode-30m: committed at <repo>/models/pycode-30m, or (CI, dev machines) in ../shared beside the clone."""
    candidates = (REPO / "models" / "pycode-30m", REPO.parent / "shared" / "models" / "pycode-30m")
    for path in candidates:
        if (path / "config.json").is_file():
            return path
    raise FileNotFoundError("the reference model pycode-30m is missing: looked in "
                            + " and ".join(str(p) for p in candidates))


def view_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, *, page_size, **kwargs):
    """query [1, Hq, T, D], key/value [1, Hkv, T, D] of the whole sequence -> [1, T, Hq, D] under the INT8 view."""
    from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref, quantize_pages_ref

    P = page_size
    _, Hq, T, D = query.shape
    Hkv = key.shape[1]
    k, v = key[0].float(), value[0].float()  # [Hkv, T, D]
    n = T // P  # complete pages
    k8, v8 = k.clone(), v.clone()  # positions of the incomplete last page are never read through the INT8 view
    if n:
        pages = quantize_pages_ref(k[:, : n * P].reshape(Hkv, n, P, D).transpose(0, 1),
                                   v[:, : n * P].reshape(Hkv, n, P, D).transpose(0, 1))
        dk = dequant_keys_ref(pages["k_upper"], pages["k_lower"], pages["k_scale"], pages["k_zero"], False)
        dv = dequant_values_ref(pages["v_upper"], pages["v_lower"], pages["v_scale"], pages["v_zero"], False)
        k8[:, : n * P] = dk.transpose(0, 1).reshape(Hkv, n * P, D)
        v8[:, : n * P] = dv.transpose(0, 1).reshape(Hkv, n * P, D)
    pos = torch.arange(T)
    int8 = (pos[None, :] // P) < (pos[:, None] // P)  # [query, key]: an earlier page
    full = ((pos[None, :] // P) == (pos[:, None] // P)) & (pos[None, :] <= pos[:, None])  # own page, causal
    G = Hq // Hkv
    q = query[0].float().view(Hkv, G, T, D)
    logits = torch.where(int8, torch.einsum("hgqd,hkd->hgqk", q, k8), torch.einsum("hgqd,hkd->hgqk", q, k)) * scaling
    logits = logits.masked_fill(~(int8 | full), float("-inf"))
    p = torch.softmax(logits, dim=-1)
    out = torch.where(int8, p, 0.0) @ v8[:, None] + torch.where(full, p, 0.0) @ v[:, None]  # [Hkv, G, T, D]
    return out.reshape(Hq, T, D).transpose(0, 1)[None].to(query.dtype), None


def register_view(page_size: int) -> str:
    """Register the view for one page size with transformers; returns the ``attn_implementation`` name."""
    from transformers import AttentionInterface

    name = f"quantspec_view_p{page_size}"
    AttentionInterface.register(name, functools.partial(view_attention, page_size=page_size))
    return name


class Scorer:
    """Teacher forcing with one HF causal LM: ``logits(ids)`` -> fp32 [len(ids), V] (row i predicts token i+1)."""

    def __init__(self, model_dir, *, dtype=torch.float32, page_size=None):
        from transformers import AutoModelForCausalLM

        attn = register_view(page_size) if page_size else "eager"
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation=attn).eval()

    def logits(self, ids) -> torch.Tensor:
        with torch.no_grad():
            return self.model(torch.tensor([list(ids)])).logits[0].float()

    def generated_logits(self, prompt, output) -> torch.Tensor:
        """Rows predicting output[0] … output[-1] when the model reads prompt + output[:-1]."""
        return self.logits(list(prompt) + list(output[:-1]))[len(prompt) - 1:]


def greedy_mismatches(logits: torch.Tensor, output) -> list:
    """(index, server token, oracle argmax, oracle logit gap) for every generated token that is not the argmax."""
    want = logits.argmax(-1)
    out = torch.tensor(list(output))
    bad = (want != out).nonzero().flatten().tolist()
    return [(i, int(out[i]), int(want[i]), float(logits[i, want[i]] - logits[i, out[i]])) for i in bad]


def agreement(logits: torch.Tensor, output) -> dict:
    """How often another model's teacher-forced argmax equals the generated tokens, and where it first differs
    (which is also where that model's own free-running greedy decoding would first leave this output)."""
    match = logits.argmax(-1) == torch.tensor(list(output))
    miss = (~match).nonzero().flatten()
    return {"positions": int(match.numel()), "agree": int(match.sum()),
            "first_divergence": int(miss[0]) if miss.numel() else None}
