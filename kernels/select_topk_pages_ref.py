"""Pure-torch reference of ``select_topk_pages`` (contract in docs/CONTRACTS.md); also the CPU path of the server.

Selection rule, shared bit for bit with the Triton kernel (so both pick the same pages):
* page score = sum over kv heads, added sequentially h = 0, 1, … in fp32 starting from 0 (a fixed order: a tree
  reduction would round differently and could swap near-equal pages); entries j >= num_eligible are never read;
* n = clamp(num_eligible, 0, min(MAXP, page_table width)); sinks = min(sink_pages, n);
  k = min(n, max(min_pages, ceil(fp32(ratio) * fp32(n)))) computed in fp32 (so 0.07 * 100 = 7, not 8 as in fp64);
  then k = max(k, sinks) (sinks are always in, even when min_pages < sink_pages) and k = min(k, KCAP);
* pages 0 … min(sinks, k)-1 are chosen; the other k - that many are the highest-scoring pages in [sinks, n), ties
  (equal fp32 score; -0.0 counts as +0.0) going to the lower page index;
* out_ids[l, b, :k] = page_table[b, chosen pages] in ascending logical order, out_ids[l, b, k:] = 0; out_count = k.
"""
from __future__ import annotations

import torch


def page_counts(num_eligible, n_max: int, ratio: float, min_pages: int, sink_pages: int, kcap: int):
    """(n, number of sink pages chosen, k) per request, int64 [B] each (the rule in the module docstring)."""
    n = num_eligible.long().clamp(0, n_max)
    sinks = n.clamp(max=sink_pages)
    # torch.full, not torch.tensor: no host-to-device copy, so policies calling this can run inside a CUDA graph
    by_ratio = torch.ceil(torch.full((), ratio, dtype=torch.float32, device=n.device) * n.float())
    k = torch.minimum(by_ratio, n.float()).long().clamp(min=min_pages)
    k = torch.minimum(k, n)
    k = torch.maximum(k, sinks).clamp(max=kcap)
    return n, torch.minimum(sinks, k), k


def order_keys(page_scores: torch.Tensor) -> torch.Tensor:
    """fp32 scores -> int64 keys in [0, 2^32) whose integer order is the float order (-0.0 == +0.0)."""
    s = torch.where(page_scores == 0, torch.zeros_like(page_scores), page_scores)
    bits = s.view(torch.int32).long()
    return torch.where(bits < 0, (bits & 0xFFFFFFFF) ^ 0xFFFFFFFF, bits | 0x80000000)


def select_topk_pages(scores, num_eligible, page_table, ratio, min_pages, sink_pages, out_ids=None, out_count=None):
    """scores [L, B, Hkv, MAXP] fp32, num_eligible [B], page_table [B, W] -> (out_ids [L, B, KCAP], out_count [L, B]).

    KCAP = out_ids.shape[-1] (MAXP when out_ids is None); new outputs are int32."""
    L, B, H, MAXP = scores.shape
    if out_ids is None:  # KCAP is the capacity of out_ids; without one, every page fits
        out_ids = torch.empty((L, B, MAXP), dtype=torch.int32, device=scores.device)
    kcap = out_ids.shape[-1]
    if out_count is None:
        out_count = torch.empty((L, B), dtype=torch.int32, device=scores.device)
    n, sinks, k = page_counts(num_eligible, min(MAXP, page_table.shape[1]), ratio, min_pages, sink_pages, kcap)

    j = torch.arange(MAXP, device=scores.device)
    valid = j < n.view(B, 1)  # [B, MAXP]
    acc = torch.zeros((L, B, MAXP), dtype=torch.float32, device=scores.device)
    for h in range(H):  # sequential on purpose: the same rounding as the kernel
        acc = acc + torch.where(valid, scores[:, :, h].float(), torch.zeros((), device=scores.device))
    cand = valid & (j >= sinks.view(B, 1))
    sort_key = torch.where(cand, order_keys(acc), torch.full_like(acc, -1, dtype=torch.int64))
    order = torch.sort(sort_key, dim=-1, descending=True, stable=True).indices  # stable: lower index wins ties
    rank = torch.empty_like(order).scatter_(-1, order, j.expand_as(order).contiguous())
    k_rem = (k - sinks).view(1, B, 1)
    chosen = (cand & (rank < k_rem)) | (j < sinks.view(B, 1))  # [L, B, MAXP]

    pos = torch.where(chosen, chosen.long().cumsum(-1) - 1, torch.full_like(rank, kcap))  # kcap = dump column
    width = min(MAXP, page_table.shape[1])
    phys = torch.zeros((B, MAXP), dtype=out_ids.dtype, device=scores.device)
    phys[:, :width] = page_table[:, :width].to(out_ids.dtype)
    res = torch.zeros((L, B, kcap + 1), dtype=out_ids.dtype, device=scores.device)
    res.scatter_(-1, pos, phys.expand(L, B, MAXP).contiguous())
    out_ids.copy_(res[..., :kcap])
    out_count.copy_(k.view(1, B).expand(L, B))
    return out_ids, out_count
