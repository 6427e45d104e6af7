"""Triton ``select_topk_pages``: per (layer, request), the logical pages the next draft round reads (sparse top-k).

One launch, one program per (layer, request); the program holds all MAXP page scores of its request in registers
(MAXP padded to a power of 2; 4096 pages = 256k tokens at P = 64 is 16 values per thread at 8 warps).

Selection (rule shared bit for bit with select_topk_pages_ref, see its docstring): instead of sorting, the kernel
finds the k_rem-th largest score by **bisection on the 32-bit order key** of the fp32 scores (the usual radix-sort
key: flip all bits of negatives, the sign bit of positives, so unsigned integer order = float order). Each of the 32
steps is one compare + one block reduction, cheaper than a bitonic sort of 4096 elements (78 compare-exchange
stages with cross-warp shuffles) and exact. Pages above the threshold are in; pages equal to it are taken in
ascending index order (an exclusive prefix sum over the ties) until k_rem is reached, which is the deterministic
tie-break "lower page index wins". A second prefix sum over the chosen mask gives each chosen page its output slot,
so the list comes out sorted by logical page index (locality for the draft kernel) with no sort at all.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _select_topk_pages_kernel(
    scores_ptr, ne_ptr, pt_ptr, ids_ptr, cnt_ptr,
    s_l, s_b, s_h, s_p, pt_b, pt_p, o_l, o_b, o_k, c_l, c_b,
    B, N_MAX, KCAP, ratio, MIN_PAGES, SINK_PAGES,
    HKV: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    l = pid // B
    b = pid % B
    n = tl.minimum(tl.maximum(tl.load(ne_ptr + b).to(tl.int32), 0), N_MAX)
    j = tl.arange(0, BLOCK_P)
    valid = j < n

    # page score: sequential sum over kv heads from 0.0 (same rounding as the reference); garbage at j >= n unread
    base = scores_ptr + l * s_l + b * s_b + j.to(tl.int64) * s_p
    acc = tl.zeros([BLOCK_P], dtype=tl.float32)
    for h in tl.static_range(HKV):  # constexpr: a handful of kv heads, unrolled
        acc = acc + tl.load(base + h * s_h, mask=valid, other=0.0)
    # 0.0 + x never yields -0.0, but a compiler folding the first add away would: make -0.0 tie with +0.0 anyway
    acc = tl.where(acc == 0.0, 0.0, acc)
    bits = acc.to(tl.uint32, bitcast=True)
    key = bits ^ tl.where((bits >> 31) != 0, 0xFFFFFFFF, 0x80000000).to(tl.uint32)

    # counts, in fp32 for ceil(ratio * n) exactly as the reference
    sinks = tl.minimum(n, SINK_PAGES)
    by_ratio = tl.minimum(tl.math.ceil(ratio * n.to(tl.float32)), n.to(tl.float32)).to(tl.int32)
    k = tl.minimum(tl.maximum(by_ratio, MIN_PAGES), n)
    k = tl.minimum(tl.maximum(k, sinks), KCAP)
    sinks = tl.minimum(sinks, k)
    k_rem = k - sinks
    cand = valid & (j >= sinks)

    # threshold = largest t with #{cand: key >= t} >= k_rem, i.e. the k_rem-th largest key (all ones when k_rem = 0)
    thr = tl.full([], 0, tl.uint32)
    probe = tl.full([], 0x80000000, tl.uint32)
    for _ in range(32):
        trial = thr | probe
        cnt = tl.sum((cand & (key >= trial)).to(tl.int32), 0)
        thr = tl.where(cnt >= k_rem, trial, thr)
        probe = probe >> 1
    above = cand & (key > thr)
    tie = (cand & (key == thr)).to(tl.int32)
    n_above = tl.sum(above.to(tl.int32), 0)
    tie_rank = tl.cumsum(tie, 0) - tie  # exclusive: lower index first
    chosen = above | ((tie != 0) & (tie_rank < k_rem - n_above)) | (j < sinks)

    # chosen pages -> slots 0..k-1 in logical order; the rest of the row is zeroed
    ch = chosen.to(tl.int32)
    slot = (tl.cumsum(ch, 0) - ch).to(tl.int64)
    phys = tl.load(pt_ptr + b * pt_b + j.to(tl.int64) * pt_p, mask=chosen, other=0)
    out = ids_ptr + l * o_l + b * o_b
    tl.store(out + slot * o_k, phys, mask=chosen)
    kk = tl.arange(0, BLOCK_K)
    tl.store(out + kk.to(tl.int64) * o_k, tl.zeros([BLOCK_K], dtype=tl.int32), mask=(kk >= k) & (kk < KCAP))
    tl.store(cnt_ptr + l * c_l + b * c_b, k)


def select_topk_pages(scores, num_eligible, page_table, ratio, min_pages, sink_pages, out_ids=None, out_count=None):
    """scores [L, B, Hkv, MAXP] fp32, num_eligible [B], page_table [B, W] -> (out_ids [L, B, KCAP], out_count [L, B]).

    KCAP = out_ids.shape[-1] (MAXP when out_ids is None); new outputs are int32. ratio/min_pages/sink_pages are
    Python scalars (runtime kernel arguments: changing them does not recompile)."""
    if scores.dim() != 4 or scores.dtype != torch.float32:
        raise ValueError(f"scores must be [L, B, Hkv, MAXP] fp32, got {tuple(scores.shape)} {scores.dtype}")
    L, B, H, MAXP = scores.shape
    if num_eligible.shape != (B,) or num_eligible.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"num_eligible must be [B={B}] int32/int64, got {tuple(num_eligible.shape)} "
                         f"{num_eligible.dtype}")
    if page_table.dim() != 2 or page_table.shape[0] != B or page_table.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"page_table must be [B={B}, W] int32/int64, got {tuple(page_table.shape)} "
                         f"{page_table.dtype}")
    if out_ids is None:
        out_ids = torch.empty((L, B, MAXP), dtype=torch.int32, device=scores.device)
    if out_ids.dim() != 3 or out_ids.shape[:2] != (L, B) or out_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"out_ids must be [L={L}, B={B}, KCAP] int32/int64, got {tuple(out_ids.shape)} "
                         f"{out_ids.dtype}")
    if out_count is None:
        out_count = torch.empty((L, B), dtype=torch.int32, device=scores.device)
    if out_count.shape != (L, B) or out_count.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"out_count must be [L={L}, B={B}] int32/int64, got {tuple(out_count.shape)} "
                         f"{out_count.dtype}")
    if min(min_pages, sink_pages) < 0 or not ratio >= 0:
        raise ValueError(f"need ratio >= 0, min_pages >= 0, sink_pages >= 0; got {ratio}, {min_pages}, {sink_pages}")
    devs = {t.device for t in (scores, num_eligible, page_table, out_ids, out_count)}
    if len(devs) != 1:
        raise ValueError(f"all tensors must be on one device, got {devs}")
    if L * B == 0:
        return out_ids, out_count
    kcap = out_ids.shape[-1]
    block_p = triton.next_power_of_2(max(MAXP, 1))
    _select_topk_pages_kernel[(L * B,)](
        scores_ptr=scores, ne_ptr=num_eligible, pt_ptr=page_table, ids_ptr=out_ids, cnt_ptr=out_count,
        s_l=scores.stride(0), s_b=scores.stride(1), s_h=scores.stride(2), s_p=scores.stride(3),
        pt_b=page_table.stride(0), pt_p=page_table.stride(1),
        o_l=out_ids.stride(0), o_b=out_ids.stride(1), o_k=out_ids.stride(2),
        c_l=out_count.stride(0), c_b=out_count.stride(1),
        B=B, HKV=H, N_MAX=min(MAXP, page_table.shape[1]), KCAP=kcap,
        ratio=float(ratio), MIN_PAGES=int(min_pages), SINK_PAGES=int(sink_pages),
        BLOCK_P=block_p, BLOCK_K=triton.next_power_of_2(max(kcap, 1)),
        # 16 scores per thread at most: 4 warps up to 2048 pages, 8 at 4096, 16 beyond
        num_warps=max(4, min(16, block_p // 512)),
    )
    return out_ids, out_count
