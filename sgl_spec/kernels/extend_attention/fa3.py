"""``extend_attention``, FA3 engine: the EXTEND (prefill) attention of a whole batch under the INT8 view through
FlashAttention-3 (sgl_kernel's, the kernel SGLang's default Hopper backend runs), in three steps a layer:

1. the INT8 view of every page some query reads before its own page is dequantized once into a transient fp16
   copy, laid out as FA3's paged KV cache (pages of P tokens; sgl_spec/kernels/dequant_pages);
2. part A: FA3 over that copy, one causal segment per request whose keys end one page behind its queries (a query
   at position t sees the INT8 keys 0 … t-P): the same tiles as stock SGLang's causal prefill;
3. part B: FA3 varlen over the last two pages of each query, [INT8 view of the page before ; own page in full
   precision], causal with a window of P keys (plan.py's ``PagedPlan`` says which keys each part reads);

then the two partial results merge by their log-sum-exp (sgl_kernel's ``merge_state_v2``; a row with no part A
key takes part B alone). This is the view of docs/CONTRACTS.md exactly (a query reads the INT8 view of the pages
before its own and its own page in full precision); FA3 computes in fp16 with fp32 softmax, the precision class of
the DECODE / TARGET_VERIFY kernels. The pure-torch twin is ``ref.py``.

``flash`` supplies ``flash_attn_with_kvcache``, ``flash_attn_varlen_func`` and ``merge_state_v2`` with
sgl_kernel's signatures (default the installed SGLang's, sgl_spec/patches; the CPU tests pass a pure-torch stand-in
of their semantics).
"""
from __future__ import annotations

import torch

from sgl_spec.kernels.extend_attention.plan import PagedPlan
from sgl_spec.kernels.dequant_pages import dequant_pages

DTYPE = torch.float16


def _sgl_flash():
    from sgl_spec.patches import sglang

    return sglang().flash_attention()


def _rows_lse(lse: torch.Tensor, T: int, H: int) -> torch.Tensor:
    """FA3's varlen log-sum-exp [H, T] (or [T, H]) -> fp32 [T, H], contiguous."""
    if lse.shape == (H, T):
        lse = lse.t()
    assert lse.shape == (T, H), f"log-sum-exp of shape {tuple(lse.shape)} for {T} rows x {H} heads"
    return lse.float().contiguous()


def check_tensors(q, k, v, prev_k, prev_v, out):
    """The shapes both FA3 engines take (q [T, Hq, D], k / v [T, Hkv, D], prev_k / prev_v [B, P, Hkv, D]); returns
    ``out`` (a new tensor like q if None) after checking it."""
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    if k.shape != (T, Hkv, D) or v.shape != k.shape or prev_v.shape != prev_k.shape or prev_k.shape[2:] != (Hkv, D):
        raise ValueError(f"shapes: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, prev_k "
                         f"{tuple(prev_k.shape)}, prev_v {tuple(prev_v.shape)}")
    if out is None:
        out = torch.empty_like(q)
    if out.shape != q.shape or out.dtype != q.dtype:
        raise ValueError(f"out must be {tuple(q.shape)} {q.dtype}, got {tuple(out.shape)} {out.dtype}")
    return out


def extend_attention(q, k, v, prev_k, prev_v, store, plan: PagedPlan, sm_scale: float, out=None, flash=None):
    """q [T, Hq, D], k / v [T, Hkv, D] (the new tokens, rows in plan order), prev_k / prev_v [B, P, Hkv, D] (each
    request's start page as the ring held it before this forward), store: the layer's PageStore with every page the
    plan reads already quantized. Returns out [T, Hq, D] in q's dtype."""
    out = check_tensors(q, k, v, prev_k, prev_v, out)
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    B, P = prev_k.shape[:2]
    if int(plan.max_q) > T or plan.cu_q.numel() != B + 1 or store.k_upper.shape[2] != P:
        raise ValueError(f"the plan covers {plan.cu_q.numel() - 1} requests and pages of {store.k_upper.shape[2]} "
                         f"tokens; got {B} requests, {T} rows and pages of {P}")
    if T == 0:
        return out
    flash = flash or _sgl_flash()
    q16 = q.to(DTYPE)
    kc, vc = dequant_pages(store, plan.dq_pages, dtype=DTYPE)  # [N8, P, Hkv, D]
    # part B's keys: [page before (INT8 view) ; own page (full precision)] of every segment, in one buffer
    kb = torch.empty((plan.b_keys, Hkv, D), dtype=DTYPE, device=q.device)
    vb = torch.empty_like(kb)
    kb[plan.b_own_pos] = torch.cat([k, prev_k.reshape(B * P, Hkv, D).to(k.dtype)])[plan.b_own_src].to(DTYPE)
    vb[plan.b_own_pos] = torch.cat([v, prev_v.reshape(B * P, Hkv, D).to(v.dtype)])[plan.b_own_src].to(DTYPE)
    if plan.n8:
        kb[plan.b_int8_pos] = kc.view(-1, Hkv, D)[plan.b_int8_src]
        vb[plan.b_int8_pos] = vc.view(-1, Hkv, D)[plan.b_int8_src]
    o_b, lse_b, *_ = flash.flash_attn_varlen_func(
        q16, kb, vb, plan.b_cu_q, plan.b_cu_k, max_seqlen_q=plan.b_max_q, max_seqlen_k=plan.b_max_k,
        softmax_scale=sm_scale, causal=True, window_size=(P - 1, 0), return_softmax_lse=True)
    if plan.n8 == 0:  # no query is a page past its request's start: part B is the whole view
        return out.copy_(o_b)
    o_a, lse_a, *_ = flash.flash_attn_with_kvcache(
        q16, kc, vc, cache_seqlens=plan.a_len, page_table=plan.a_table, cu_seqlens_q=plan.cu_q,
        max_seqlen_q=plan.max_q, softmax_scale=sm_scale, causal=True, return_softmax_lse=True)
    # rows without part A keys get an infinite log-sum-exp from FA3, which merge_state_v2 weighs as 0
    merged, _ = flash.merge_state_v2(o_a.contiguous(), _rows_lse(lse_a, T, Hq), o_b.contiguous(),
                                     _rows_lse(lse_b, T, Hq))
    return out.copy_(merged)
