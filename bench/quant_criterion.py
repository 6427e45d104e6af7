"""The issue's quantize_pages criterion: "quantize_pages for one page of a 32-layer model costs < 2% of one BF16
decode step at 32k" (Llama-3-8B layer shapes).

A BF16 decode step of Llama-3-8B does at least two things that cannot overlap with nothing else to hide them:
its attention (measured: the fastest BF16 paged-attention baseline of the same run, times the layer count) and
reading every weight it multiplies with once (at the device-to-device copy bandwidth measured in the same run).
Their sum is a LOWER bound on the step (no norms, rotary, sampling, launch gaps, KV writes), so
frac = t_quantize / step_lower_bound is an UPPER bound on the share. ``frac`` divides by the attention alone (a
smaller denominator, recorded for comparison); the weight-inclusive bound is ``frac_step_lb``.

Two quantize timings:
* ``quantize_us``: one launch in isolation (CUDA-graph replay, cold L2), times the layer count;
* ``quantize_layers_us``: one CUDA graph of ``layers`` launches, each on its own layer's source rows and page store
  (cold L2 before the graph), as the server's decode graph runs them, one per layer: no per-launch event/graph
  start-up overhead counted 32 times, but every layer's source still comes from DRAM.

Amortization: the server launches quantize_pages in every layer of every (verify) forward with one entry per
request; an entry whose request completes no page points at page 0 and is quantized anyway (fixed shapes for CUDA
graphs), so the per-step cost is the full launch. A request really completes a page once per P tokens; a kernel
that skipped padding entries would approach ``amortized_frac_step_lb`` = frac_step_lb / P (plus launch overhead).
"""
from __future__ import annotations

import torch

from kernel_cases import HKV, D, DTYPE
from sgl_spec.kvcache.format import KVFormat

# Llama-3-8B (meta-llama/Meta-Llama-3-8B config.json): untied embeddings, SwiGLU MLP, GQA 32/8 heads of 128.
LLAMA3_8B = dict(vocab=128256, hidden=4096, intermediate=14336, layers=32, heads=32, kv_heads=8, head_dim=128)


def llama_params(c=LLAMA3_8B) -> dict:
    """Parameter counts from the architecture (no biases)."""
    h, hd = c["hidden"], c["head_dim"]
    attn = h * c["heads"] * hd * 2 + h * c["kv_heads"] * hd * 2  # q, o + k, v projections
    mlp = 3 * h * c["intermediate"]  # gate, up, down
    per_layer = attn + mlp + 2 * h  # + input and post-attention RMSNorm weights
    embed = c["vocab"] * h
    total = c["layers"] * per_layer + h + embed + embed  # + final norm, embedding table, lm_head (untied)
    return dict(per_layer=per_layer, embed=embed, total=total)


def decode_weight_bytes(c=LLAMA3_8B, bytes_per_param=2) -> int:
    """Bytes of weights one decode step must read: all of them except the embedding table, of which a step gathers
    only its B rows (left out: this is a lower bound). Llama-3-8B bf16: 7,504,924,672 params -> 15.01e9 bytes
    (16.06e9 with the embedding table)."""
    p = llama_params(c)
    return (p["total"] - p["embed"]) * bytes_per_param


def layer_buffers(B: int, P: int, layers: int, device):
    """Per layer: its own source rows ([B*P, Hkv, D] K and V, page i = rows i*P…) and page store; the row/page id
    tensors are shared, as the server's per-forward metadata is. Random values (they do not change the work)."""
    fmt = KVFormat(P, HKV, D)
    per_layer = [(torch.randn(B * P, HKV, D, device=device, dtype=DTYPE),
                  torch.randn(B * P, HKV, D, device=device, dtype=DTYPE), fmt.alloc(B, device)) for _ in range(layers)]
    rows = torch.arange(B, device=device) * P
    ids = torch.arange(B, dtype=torch.int32, device=device)
    return per_layer, rows, ids


def layer_graph_call(quantize, bufs):
    """One callable that quantizes one page per request in each layer of ``bufs`` (from layer_buffers)."""
    per_layer, rows, ids = bufs

    def run():
        for k, v, st in per_layer:
            quantize(k, v, rows, ids, st)

    return run


def entry(B, P, ctx, layers, quantize_ms, decode_ms, baseline, copy_gbps, layers_ms=None) -> dict:
    """One criterion result: ``frac``/``passed`` against the attention alone, ``*_step_lb`` against the step's bound."""
    wbytes = decode_weight_bytes()
    weights_ms = wbytes / copy_gbps / 1e6
    step_lb_ms = layers * decode_ms + weights_ms
    frac = (layers * quantize_ms) / (layers * decode_ms)
    frac_lb = layers * quantize_ms / step_lb_ms
    e = dict(batch=B, page=P, ctx=ctx, quantize_us=quantize_ms * 1e3, bf16_decode_us=decode_ms * 1e3,
             baseline=baseline, frac=frac, passed=frac < 0.02,
             weights_bytes=wbytes, weights_us=weights_ms * 1e3, bf16_step_lb_us=step_lb_ms * 1e3,
             frac_step_lb=frac_lb, passed_step_lb=frac_lb < 0.02, amortized_frac_step_lb=frac_lb / P)
    if layers_ms is not None:
        e.update(quantize_layers_us=layers_ms * 1e3, frac_layers_step_lb=layers_ms / step_lb_ms,
                 passed_layers_step_lb=layers_ms / step_lb_ms < 0.02)
    return e


def formula(layers: int, ctx: int) -> str:
    return (f"frac = ({layers} * t_quantize_pages(one launch, one page per request)) / ({layers} * "
            f"t_bf16_decode_attention(same batch and page, ctx {ctx})) (the step approximated by its "
            f"attention alone); frac_step_lb = {layers} * t_quantize / ({layers} * t_bf16_decode_attention + "
            f"weights_bytes / copy_bandwidth), weights_bytes = Llama-3-8B bf16 weights a decode step reads "
            f"({decode_weight_bytes():.4g} B, embedding table excluded): a lower bound on the BF16 step, so an upper "
            f"bound on the share; frac_layers_step_lb uses t of one CUDA graph of {layers} launches (one per layer, "
            f"own buffers) instead of {layers} x one isolated launch. The server launches quantize_pages every layer "
            f"of every forward (padding entries quantize page 0), so the per-step share is the unamortized one; "
            f"a page completes once per P steps: amortized_frac_step_lb = frac_step_lb / P")


def summary_line(layers: int, q: dict) -> str:
    s = (f"quantize_pages B={q['batch']} P={q['page']}: {layers}*{q['quantize_us']:.2f}us / "
         f"({layers}*{q['bf16_decode_us']:.1f}us {q['baseline']} + weights {q['weights_us']:.0f}us) = "
         f"{q['frac_step_lb']:.2%} -> {'PASS' if q['passed_step_lb'] else 'FAIL'} (< 2%); attention-only "
         f"denominator: {q['frac']:.2%}")
    if "quantize_layers_us" in q:
        s += f"; {layers}-launch graph {q['quantize_layers_us']:.1f}us = {q['frac_layers_step_lb']:.2%}"
    return s
