"""``extend_attention``, FA3 engine: the EXTEND (prefill) attention of a whole batch under the INT8 view through
FlashAttention-3 (sgl_kernel's, the kernel SGLang's default Hopper backend runs), in three steps a layer:

1. the INT8 view of every page some query reads before its own page is dequantized once into a transient fp16
   copy, laid out as FA3's paged KV cache (pages of P tokens);
2. FA3 over that copy, non-causal, with one query segment per (request, page) - the new tokens of one page - whose
   page table lists the request's pages before the segment's page: the INT8 part of the view;
3. FA3 varlen over each segment's own page in full precision, causal (``[k ; prev_k]`` rows gathered by the plan):
   the positions before ``start`` from the ring's copy, later ones from the new K/V;

then the two partial results merge by their log-sum-exp (a row with no INT8 page takes part 3 alone). This is the
view of docs/CONTRACTS.md exactly (a query reads the INT8 view of the pages before its own and its own page in full
precision); FA3 computes in fp16 with fp32 softmax, the precision class of the DECODE / TARGET_VERIFY kernels. The
pure-torch twin is ``ref.py``; the layout is plan.py's ``PagedPlan``.

``flash`` supplies ``flash_attn_with_kvcache`` and ``flash_attn_varlen_func`` with sgl_kernel's signatures (default
``sgl_kernel.flash_attn``; the CPU tests pass a pure-torch stand-in of their semantics).
"""
from __future__ import annotations

import torch

from sgl_spec.kernels.extend_attention.plan import PagedPlan
from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref

DTYPE = torch.float16


def _sgl_flash():
    import sgl_kernel.flash_attn as flash

    return flash


def dequant_view(store, pages: torch.Tensor, dtype=DTYPE) -> tuple[torch.Tensor, torch.Tensor]:
    """INT8 view of physical ``pages`` [n] as FA3's paged layout: K, V ``[n, P, Hkv, D]`` in ``dtype``."""
    k = dequant_keys_ref(store.k_upper[pages], store.k_lower[pages], store.k_scale[pages], store.k_zero[pages], False)
    v = dequant_values_ref(store.v_upper[pages], store.v_lower[pages], store.v_scale[pages], store.v_zero[pages],
                           False)
    return (k.transpose(1, 2).to(dtype).contiguous(), v.transpose(1, 2).to(dtype).contiguous())


def _rows_lse(lse: torch.Tensor, T: int, H: int) -> torch.Tensor:
    """FA3's varlen log-sum-exp [H, T] (or [T, H]) -> fp32 [T, H]."""
    if lse.shape == (H, T):
        lse = lse.t()
    assert lse.shape == (T, H), f"log-sum-exp of shape {tuple(lse.shape)} for {T} rows x {H} heads"
    return lse.float()


def extend_attention(q, k, v, prev_k, prev_v, store, plan: PagedPlan, sm_scale: float, out=None, flash=None):
    """q [T, Hq, D], k / v [T, Hkv, D] (the new tokens, rows in plan order), prev_k / prev_v [B, P, Hkv, D] (each
    request's start page as the ring held it before this forward), store: the layer's PageStore with every page the
    plan reads already quantized. Returns out [T, Hq, D] in q's dtype."""
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    B, P = prev_k.shape[:2]
    if k.shape != (T, Hkv, D) or v.shape != k.shape or prev_v.shape != prev_k.shape or prev_k.shape[2:] != (Hkv, D):
        raise ValueError(f"shapes: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, prev_k "
                         f"{tuple(prev_k.shape)}, prev_v {tuple(prev_v.shape)}")
    if plan.has_prefix.numel() != T or store.k_upper.shape[2] != P:
        raise ValueError(f"the plan covers {plan.has_prefix.numel()} rows and pages of {store.k_upper.shape[2]} "
                         f"tokens; got {T} rows and pages of {P}")
    if out is None:
        out = torch.empty_like(q)
    if out.shape != q.shape or out.dtype != q.dtype:
        raise ValueError(f"out must be {tuple(q.shape)} {q.dtype}, got {tuple(out.shape)} {out.dtype}")
    if T == 0:
        return out
    flash = flash or _sgl_flash()
    q16 = q.to(DTYPE)
    own_k = torch.cat([k, prev_k.reshape(B * P, Hkv, D).to(k.dtype)])[plan.own_idx].to(DTYPE)
    own_v = torch.cat([v, prev_v.reshape(B * P, Hkv, D).to(v.dtype)])[plan.own_idx].to(DTYPE)
    o_own, lse_own, *_ = flash.flash_attn_varlen_func(
        q16, own_k, own_v, plan.cu_q, plan.cu_k, max_seqlen_q=plan.max_q, max_seqlen_k=plan.max_k,
        softmax_scale=sm_scale, causal=True, return_softmax_lse=True)
    if plan.n8 == 0:
        return out.copy_(o_own)
    kc, vc = dequant_view(store, plan.dq_pages)
    o_int8, lse_int8, *_ = flash.flash_attn_with_kvcache(
        q16, kc, vc, cache_seqlens=plan.prefix_len, page_table=plan.prefix_table, cu_seqlens_q=plan.cu_q,
        max_seqlen_q=plan.max_q, softmax_scale=sm_scale, causal=False, return_softmax_lse=True)
    # rows without INT8 pages: FA3 returns a zero output with an infinite log-sum-exp; they take their own page alone
    a = torch.where(plan.has_prefix[:, None], _rows_lse(lse_int8, T, Hq), float("-inf"))
    o_int8 = torch.where(plan.has_prefix[:, None, None], o_int8, 0.0)
    c = _rows_lse(lse_own, T, Hq)  # finite: every row sees its own token
    m = torch.maximum(a, c)
    wa, wc = torch.exp(a - m), torch.exp(c - m)
    merged = (o_int8.float() * wa[..., None] + o_own.float() * wc[..., None]) / (wa + wc)[..., None]
    return out.copy_(merged)
