"""Pure-torch reference of ``select_topk_pages`` (contract in docs/CONTRACTS.md); also the CPU path of the server.

Selection rule, shared bit for bit with the Triton kernel (so both pick the same pages):
* n = clamp(num_eligible // page_div, 0, min(MAXP, page_table width)); sinks = min(sink_pages, n);
  k = min(n, max(min_pages, ceil(fp32(ratio) * fp32(n)))) computed in fp32 (so 0.07 * 100 = 7, not 8 as in fp64);
  then k = max(k, sinks) (sinks are always in, even when min_pages < sink_pages) and k = min(k, KCAP);
* scored = clamp(num_scored // page_div, 0, n) (n when num_scored is None or scores is None): pages j < scored have
  a score; pages scored … n-1 have none and are *forced* (score +inf);
* page score (one per page, or one per page and kv head with ``per_head``) = sum over kv heads, added sequentially
  h = 0, 1, … in fp32 starting from 0 (a fixed order: a tree reduction would round differently and could swap
  near-equal pages); per_head: that head's score alone; 0 everywhere when ``scores`` is None. Entries j >= scored are
  never read;
* smoothing (``hist`` [L, R, G, MAXP] fp32 + ``hist_n`` [L, R, G] int, G = Hkv with per_head, else 1; row = rows[b]):
  the history holds hist_n valid pages; the ranking score of page j < hist_n is ``ema``: fp32(ema)·hist +
  fp32(1-ema)·score (two fp32 products and one fp32 add, never fused), ``max``: max(hist, score); j >= hist_n: the
  score. Then hist[j < scored] = that ranking score (ema) / this score (max), and hist_n = scored; without scores
  the history is only reset (hist_n = 0: a new request in the slot);
* forced newest pages: r = floor(fp32(recent_share) · fp32(k - sinks)); pages j >= n - max(r, n - scored) get +inf;
  (``recent_share = 1`` without scores is StreamingLLM: sinks + the newest k - sinks pages);
* pages 0 … min(sinks, k)-1 are chosen; the other k - that many are the highest-ranked pages in [sinks, n), ties
  (equal fp32 score; -0.0 counts as +0.0; +inf ties +inf) going to the lower page index;
* out_ids[l, rows[b], (g,) :k] = page_table[table_rows[b], chosen pages] // page_div in ascending logical order,
  out_ids[..., k:] = 0; out_count[l, rows[b]] = k. ``skip[b]`` true: row b writes nothing (ids, count, history).
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


def _f32(x: float, dev) -> torch.Tensor:
    return torch.full((), x, dtype=torch.float32, device=dev)


def select_topk_pages(scores, num_eligible, page_table, ratio, min_pages, sink_pages, out_ids=None, out_count=None,
                      *, per_head=False, rows=None, table_rows=None, page_div=1, num_scored=None, recent_share=0.0,
                      skip=None, hist=None, hist_n=None, smoothing="none", ema=0.5):
    """scores [L, B, Hkv, MAXP] fp32 (or None), num_eligible [B], page_table [R', W]
    -> (out_ids [L, R, KCAP] ([L, R, Hkv, KCAP] with per_head), out_count [L, R]); the rule in the module docstring.

    KCAP = out_ids.shape[-1] (MAXP when out_ids is None); new outputs are int32, R = B."""
    B = num_eligible.shape[0]
    dev = num_eligible.device
    if scores is None and out_ids is None:
        raise ValueError("select_topk_pages(scores=None) needs out_ids (it gives the number of layers)")
    L = scores.shape[0] if scores is not None else out_ids.shape[0]
    H = scores.shape[2] if scores is not None else (out_ids.shape[2] if per_head else 1)
    MAXP = scores.shape[3] if scores is not None else page_table.shape[1]
    G = H if per_head else 1
    if out_ids is None:  # KCAP is the capacity of out_ids; without one, every page fits
        out_ids = torch.empty((L, B, G, MAXP) if per_head else (L, B, MAXP), dtype=torch.int32, device=dev)
    kcap = out_ids.shape[-1]
    if out_count is None:
        out_count = torch.empty((L, B), dtype=torch.int32, device=dev)
    rws = torch.arange(B, device=dev) if rows is None else rows.long()
    trw = torch.arange(B, device=dev) if table_rows is None else table_rows.long()
    live = torch.ones(B, dtype=torch.bool, device=dev) if skip is None else ~skip.bool()
    div = lambda t: torch.div(t.long(), page_div, rounding_mode="floor")  # noqa: E731
    width = min(MAXP, page_table.shape[1])
    n, sinks, k = page_counts(div(num_eligible), width, ratio, min_pages, sink_pages, kcap)
    scored = n if scores is None or num_scored is None else torch.minimum(div(num_scored).clamp(min=0), n)

    j = torch.arange(MAXP, device=dev)
    readable = (j < scored.view(B, 1)).view(1, B, 1, MAXP)
    zero = torch.zeros((), device=dev)
    if scores is None:
        acc = torch.zeros((L, B, G, MAXP), dtype=torch.float32, device=dev)
    elif per_head:
        acc = torch.where(readable, scores.float(), zero)
    else:
        acc = torch.zeros((L, B, 1, MAXP), dtype=torch.float32, device=dev)
        for h in range(H):  # sequential on purpose: the same rounding as the kernel
            acc = acc + torch.where(readable, scores[:, :, h : h + 1].float(), zero)
    if hist is not None and smoothing != "none" and scores is None:  # no scores: reset (a new request in the slot)
        hist_n[:, rws] = torch.where(live.view(1, B, 1), torch.zeros_like(hist_n[:, rws]), hist_n[:, rws])
    elif hist is not None and smoothing != "none":
        prev, prev_n = hist[:, rws, :, :MAXP], hist_n[:, rws]  # [L, B, G, MAXP], [L, B, G]
        old = j < prev_n.unsqueeze(-1)
        if smoothing == "ema":
            mixed = torch.where(old, _f32(ema, dev) * prev + _f32(1.0 - ema, dev) * acc, acc)
            keep = mixed
        else:
            mixed = torch.where(old, torch.maximum(prev, acc), acc)
            keep = acc
        upd = readable & live.view(1, B, 1, 1)
        hist[:, rws, :, :MAXP] = torch.where(upd, keep, prev)
        hist_n[:, rws] = torch.where(live.view(1, B, 1), scored.view(1, B, 1).to(hist_n.dtype), prev_n)
        acc = mixed
    r = torch.floor(_f32(recent_share, dev) * (k - sinks).float()).long()
    forced_from = n - torch.maximum(r, n - scored)
    acc = torch.where(j >= forced_from.view(B, 1, 1), torch.full_like(acc, float("inf")), acc)

    bv = lambda t: t.view(1, B, 1, 1)  # noqa: E731
    cand = (j < bv(n)) & (j >= bv(sinks))
    sort_key = torch.where(cand, order_keys(acc), torch.full_like(acc, -1, dtype=torch.int64))
    order = torch.sort(sort_key, dim=-1, descending=True, stable=True).indices  # stable: lower index wins ties
    rank = torch.empty_like(order).scatter_(-1, order, j.expand_as(order).contiguous())
    chosen = (cand & (rank < bv(k - sinks))) | (j < bv(sinks))  # [L, B, G, MAXP]

    pos = torch.where(chosen, chosen.long().cumsum(-1) - 1, torch.full_like(rank, kcap))  # kcap = dump column
    phys = torch.zeros((B, MAXP), dtype=torch.int64, device=dev)
    phys[:, :width] = div(page_table[trw, :width])
    res = torch.zeros((L, B, G, kcap + 1), dtype=out_ids.dtype, device=dev)
    res.scatter_(-1, pos, phys.to(out_ids.dtype).view(1, B, 1, MAXP).expand(L, B, G, MAXP).contiguous())
    res = res[..., :kcap] if per_head else res[:, :, 0, :kcap]
    lv = live.view((1, B, 1, 1) if per_head else (1, B, 1))
    out_ids[:, rws] = torch.where(lv, res, out_ids[:, rws])
    out_count[:, rws] = torch.where(live.view(1, B), k.view(1, B).to(out_count.dtype), out_count[:, rws])
    return out_ids, out_count
