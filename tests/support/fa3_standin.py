"""A pure-torch stand-in for the two FlashAttention-3 entry points of sgl_kernel.flash_attn that the FA3 prefill
engine calls (sgl_spec/kernels/extend_attention/fa3.py), with their documented semantics, so the engine's layout
and merge are tested on the CPU; the GPU tests run the real kernels against the same twin.

* ``flash_attn_varlen_func``: packed q / k / v with cu_seqlens, GQA (query head h reads KV head h // G), causal
  aligned to the bottom right of each sequence's [q_len, k_len] matrix;
* ``flash_attn_with_kvcache``: varlen q over a paged cache ``[blocks, page, Hkv, D]`` whose sequence i is the first
  ``cache_seqlens[i]`` tokens of pages ``page_table[i]``;
* both return (out, lse): fp32 log-sum-exp per (head, row) as ``[H, total_q]``; a row with no visible key gets a
  zero output and lse = +inf, as FA3 gives it.
"""
import torch


def _attend(q, k, v, scale, causal):
    """q [n, Hq, D], k / v [m, Hkv, D] -> out [n, Hq, D] (q's dtype), lse [Hq, n] fp32."""
    n, Hq, D = q.shape
    m, Hkv = k.shape[:2]
    G = Hq // Hkv
    kk = k.float().repeat_interleave(G, dim=1)
    vv = v.float().repeat_interleave(G, dim=1)
    s = torch.einsum("nhd,mhd->hnm", q.float(), kk) * scale
    if causal:
        visible = torch.arange(m)[None, :] <= torch.arange(n)[:, None] + (m - n)
        s = s.masked_fill(~visible[None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # -inf where nothing is visible
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    out = torch.einsum("hnm,mhd->nhd", torch.nan_to_num(p, nan=0.0), vv)
    return out.to(q.dtype), torch.where(torch.isinf(lse), float("inf"), lse)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                           softmax_scale=None, causal=False, return_softmax_lse=False, **_):
    out = torch.zeros_like(q)
    lse = torch.full((q.shape[1], q.shape[0]), float("inf"))
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for i in range(len(cq) - 1):
        if cq[i + 1] > cq[i] and ck[i + 1] > ck[i]:
            o, l_ = _attend(q[cq[i]:cq[i + 1]], k[ck[i]:ck[i + 1]], v[ck[i]:ck[i + 1]], softmax_scale, causal)
            out[cq[i]:cq[i + 1]], lse[:, cq[i]:cq[i + 1]] = o, l_
    return (out, lse) if return_softmax_lse else out


def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=None, page_table=None, cu_seqlens_q=None,
                            max_seqlen_q=None, softmax_scale=None, causal=False, return_softmax_lse=False, **_):
    page = k_cache.shape[1]
    out = torch.zeros_like(q)
    lse = torch.full((q.shape[1], q.shape[0]), float("inf"))
    cq, lens = cu_seqlens_q.tolist(), cache_seqlens.tolist()
    for i in range(len(cq) - 1):
        L = lens[i]
        if cq[i + 1] == cq[i] or L == 0:
            continue
        blocks = page_table[i, :-(-L // page)].long()
        k = k_cache[blocks].reshape(-1, *k_cache.shape[2:])[:L]
        v = v_cache[blocks].reshape(-1, *v_cache.shape[2:])[:L]
        o, l_ = _attend(q[cq[i]:cq[i + 1]], k, v, softmax_scale, causal)
        out[cq[i]:cq[i + 1]], lse[:, cq[i]:cq[i + 1]] = o, l_
    return (out, lse) if return_softmax_lse else out
