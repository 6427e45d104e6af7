"""A pure-torch stand-in for the two FlashAttention-3 entry points of sgl_kernel.flash_attn that the FA3 prefill
engine calls (sgl_spec/kernels/extend_attention/fa3.py), with their documented semantics, so the engine's layout
and merge are tested on the CPU; the GPU tests run the real kernels against the same twin.

* ``flash_attn_varlen_func``: packed q / k / v with cu_seqlens, GQA (query head h reads KV head h // G), causal
  aligned to the bottom right of each sequence's [q_len, k_len] matrix;
* ``flash_attn_with_kvcache``: varlen q over a paged cache ``[blocks, page, Hkv, D]`` whose sequence i is the first
  ``cache_seqlens[i]`` tokens of pages ``page_table[i]``;
* both take ``window_size=(left, right)`` (-1: unbounded): row i of a sequence sees keys
  i + k_len - q_len - left … i + k_len - q_len + right (with ``causal``, right = 0);
* both return (out, lse): fp32 log-sum-exp per (head, row) as ``[H, total_q]``; a row with no visible key gets a
  zero output and lse = +inf, as FA3 gives it;
* ``merge_state_v2`` (sgl_kernel's): two partial results and their log-sum-exps ``[T, H]`` -> the merged pair; an
  infinite log-sum-exp of either sign weighs its part as 0.
"""
import torch


def _attend(q, k, v, scale, causal, window=(-1, -1)):
    """q [n, Hq, D], k / v [m, Hkv, D] -> out [n, Hq, D] (q's dtype), lse [Hq, n] fp32."""
    n, Hq, D = q.shape
    m, Hkv = k.shape[:2]
    G = Hq // Hkv
    kk = k.float().repeat_interleave(G, dim=1)
    vv = v.float().repeat_interleave(G, dim=1)
    s = torch.einsum("nhd,mhd->hnm", q.float(), kk) * scale
    left, right = window
    if causal:
        right = 0
    if left >= 0 or right >= 0:
        diag = torch.arange(n)[:, None] + (m - n)
        j = torch.arange(m)[None, :]
        visible = torch.ones(n, m, dtype=torch.bool)
        if right >= 0:
            visible &= j <= diag + right
        if left >= 0:
            visible &= j >= diag - left
        s = s.masked_fill(~visible[None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # -inf where nothing is visible
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    out = torch.einsum("hnm,mhd->nhd", torch.nan_to_num(p, nan=0.0), vv)
    return out.to(q.dtype), torch.where(torch.isinf(lse), float("inf"), lse)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                           softmax_scale=None, causal=False, window_size=(-1, -1), return_softmax_lse=False, **_):
    out = torch.zeros_like(q)
    lse = torch.full((q.shape[1], q.shape[0]), float("inf"))
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for i in range(len(cq) - 1):
        if cq[i + 1] > cq[i] and ck[i + 1] > ck[i]:
            o, l_ = _attend(q[cq[i]:cq[i + 1]], k[ck[i]:ck[i + 1]], v[ck[i]:ck[i + 1]], softmax_scale, causal,
                             window_size)
            out[cq[i]:cq[i + 1]], lse[:, cq[i]:cq[i + 1]] = o, l_
    return (out, lse) if return_softmax_lse else out


def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=None, page_table=None, cu_seqlens_q=None,
                            max_seqlen_q=None, softmax_scale=None, causal=False, window_size=(-1, -1),
                            return_softmax_lse=False, **_):
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
        o, l_ = _attend(q[cq[i]:cq[i + 1]], k, v, softmax_scale, causal, window_size)
        out[cq[i]:cq[i + 1]], lse[:, cq[i]:cq[i + 1]] = o, l_
    return (out, lse) if return_softmax_lse else out


def merge_state_v2(v_a, s_a, v_b, s_b, v_merged=None, s_merged=None):
    s_a, s_b = (torch.where(torch.isinf(x), float("-inf"), x.float()) for x in (s_a, s_b))
    m = torch.maximum(s_a, s_b)
    m = torch.where(torch.isinf(m), 0.0, m)
    wa, wb = torch.exp(s_a - m), torch.exp(s_b - m)
    v = (v_a.float() * wa[..., None] + v_b.float() * wb[..., None]) / (wa + wb)[..., None]
    s = m + torch.log(wa + wb)
    if v_merged is None:
        return v.to(v_a.dtype), s
    v_merged.copy_(v)
    if s_merged is not None:
        s_merged.copy_(s)
    return v_merged, s_merged if s_merged is not None else s
