"""``extend_attention``, FA3 engine in one call a layer: the EXTEND attention of a whole batch under the INT8 view
through FlashAttention-3 (sgl_kernel's), without the second call and the merge of fa3.py:

1. the INT8 view of every page some query reads before its own page is dequantized into a transient fp16 paged
   copy (sgl_spec/kernels/dequant_pages), and each segment's own page - one segment per (request, page its new
   tokens touch) - is written after those pages in full precision (the ring part before the request's start, then
   the new rows; slots past a segment's last row stay zero and are never read);
2. FA3 over that copy, one causal segment per query page whose page-table row is [INT8 pages 0 … j-1 ; own page j]
   (plan.py's ``SegmentPlan``): a query at page offset r sees the INT8 view of the pages before its own and its own
   page up to itself - the view of docs/CONTRACTS.md exactly.

The segments are at most a page of queries each (GQA rows packed by FA3), and a page j segment re-reads the j pages
before it (from L2 for a prompt's own copy). FA3 computes in fp16 with fp32 softmax, the precision class of the
DECODE / TARGET_VERIFY kernels. The pure-torch twin is ``ref.py``; ``flash`` as in fa3.py.
"""
from __future__ import annotations

import torch

from sgl_spec.kernels.dequant_pages import dequant_pages
from sgl_spec.kernels.extend_attention.fa3 import DTYPE, _sgl_flash, check_tensors
from sgl_spec.kernels.extend_attention.plan import SegmentPlan


def extend_attention(q, k, v, prev_k, prev_v, store, plan: SegmentPlan, sm_scale: float, out=None, flash=None):
    """q [T, Hq, D], k / v [T, Hkv, D] (the new tokens, rows in plan order), prev_k / prev_v [B, P, Hkv, D] (each
    request's start page as the ring held it before this forward), store: the layer's PageStore with every page the
    plan reads already quantized. Returns out [T, Hq, D] in q's dtype."""
    out = check_tensors(q, k, v, prev_k, prev_v, out)
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    B, P = prev_k.shape[:2]
    if plan.max_q > P or store.k_upper.shape[2] != P or plan.cu_q.numel() != plan.segments + 1:
        raise ValueError(f"the plan's segments ({plan.segments}, at most {plan.max_q} rows) do not fit pages of "
                         f"{store.k_upper.shape[2]} tokens and a ring of {P}")
    if T == 0:
        return out
    flash = flash or _sgl_flash()
    pages = plan.n8 + plan.segments
    kc = torch.empty((pages, P, Hkv, D), dtype=DTYPE, device=q.device)
    vc = torch.empty_like(kc)
    if plan.n8:
        dequant_pages(store, plan.dq_pages, out_k=kc[:plan.n8], out_v=vc[:plan.n8], dtype=DTYPE)
    for cache, new, ring in ((kc, k, prev_k), (vc, v, prev_v)):
        cache[plan.n8:].zero_()
        src = torch.cat([new, ring.reshape(B * P, Hkv, D).to(new.dtype)])
        cache.view(-1, Hkv, D)[plan.own_pos] = src[plan.own_src].to(DTYPE)
    o = flash.flash_attn_with_kvcache(
        q.to(DTYPE), kc, vc, cache_seqlens=plan.seqlens, page_table=plan.table, cu_seqlens_q=plan.cu_q,
        max_seqlen_q=plan.max_q, softmax_scale=sm_scale, causal=True)
    return out.copy_(o[0] if isinstance(o, (tuple, list)) else o)
