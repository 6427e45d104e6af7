"""Triton ``select_topk_pages``: per (layer, request[, kv head]), the logical pages the next draft round reads.

One launch, one program per (layer, request, head group); the program holds all MAXP page scores of its request in
registers (MAXP padded to a power of 2; 4096 pages = 256k tokens at P = 64 is 16 values per thread at 8 warps).

Selection (rule shared bit for bit with select_topk_pages_ref, see its docstring): instead of sorting, the kernel
finds the k_rem-th largest score by **bisection on the 32-bit order key** of the fp32 scores (the usual radix-sort
key: flip all bits of negatives, the sign bit of positives, so unsigned integer order = float order). Each of the 32
steps is one compare + one block reduction, cheaper than a bitonic sort of 4096 elements (78 compare-exchange
stages with cross-warp shuffles) and exact. Pages above the threshold are in; pages equal to it are taken in
ascending index order (an exclusive prefix sum over the ties) until k_rem is reached, which is the deterministic
tie-break "lower page index wins". A second prefix sum over the chosen mask gives each chosen page its output slot,
so the list comes out sorted by logical page index (locality for the draft kernel) with no sort at all.

Why the policy options live in here (forced newest pages, score smoothing, per-slot rows, token units): as ~40 small
torch ops around this launch a draft page policy's step between two rounds takes 75-130 us per round on an H100 even
inside a CUDA graph (launch bound); folded in, the whole step is this one launch.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

SMOOTHING = {"none": 0, "ema": 1, "max": 2}
# Integers Triton would otherwise specialize on (== 1, multiple of 16): the batch and the outer strides of per-batch
# tensors follow the batch size, so each new one could compile a variant while serving; the counts gain nothing from it.
_RUNTIME_INTS = ["s_l", "s_b", "s_h", "pt_r", "h_l", "h_r", "h_g", "hn_l", "hn_r", "hn_g", "o_l", "o_r", "o_g", "c_l",
                 "c_r", "B", "G", "N_MAX", "KCAP", "DIV", "MIN_PAGES", "SINK_PAGES"]


@triton.jit(do_not_specialize=_RUNTIME_INTS)
def _select_topk_pages_kernel(
    scores_ptr, ne_ptr, ns_ptr, pt_ptr, trow_ptr, row_ptr, skip_ptr, hist_ptr, hn_ptr, ids_ptr, cnt_ptr,
    s_l, s_b, s_h, s_p, pt_r, pt_p, h_l, h_r, h_g, h_p, hn_l, hn_r, hn_g, o_l, o_r, o_g, o_k, c_l, c_r,
    B, G, N_MAX, KCAP, DIV, ratio, share, b1, b2, MIN_PAGES, SINK_PAGES,
    HKV: tl.constexpr, HAS_SCORES: tl.constexpr, PER_HEAD: tl.constexpr, HAS_SCORED: tl.constexpr,
    HAS_TROWS: tl.constexpr, HAS_ROWS: tl.constexpr, HAS_SKIP: tl.constexpr, SMOOTH: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    g = pid % G
    l = pid // G // B
    b = pid // G % B
    live = pid >= 0  # a scalar true
    if HAS_SKIP:
        live = tl.load(skip_ptr + b) == 0
    row = b
    if HAS_ROWS:
        row = tl.load(row_ptr + b).to(tl.int64)
    trow = b
    if HAS_TROWS:
        trow = tl.load(trow_ptr + b).to(tl.int64)
    # operands are >= 0 where it matters; a negative count clamps to 0 whether // truncates or floors
    n = tl.minimum(tl.maximum(tl.load(ne_ptr + b).to(tl.int64) // DIV, 0), N_MAX).to(tl.int32)
    scored = n
    if HAS_SCORED:
        scored = tl.minimum(tl.maximum(tl.load(ns_ptr + b).to(tl.int64) // DIV, 0), n.to(tl.int64)).to(tl.int32)
    j = tl.arange(0, BLOCK_P)
    readable = j < scored

    # page score: per head, or a sequential sum over kv heads from 0.0 (same rounding as the reference)
    acc = tl.zeros([BLOCK_P], dtype=tl.float32)
    if HAS_SCORES:
        base = scores_ptr + l * s_l + b * s_b + j.to(tl.int64) * s_p
        if PER_HEAD:
            acc = acc + tl.load(base + g * s_h, mask=readable, other=0.0)
        else:
            for h in tl.static_range(HKV):  # constexpr: a handful of kv heads, unrolled
                acc = acc + tl.load(base + h * s_h, mask=readable, other=0.0)
    if SMOOTH != 0 and not HAS_SCORES:  # no scores: the history is reset (a new request in this slot)
        tl.store(hn_ptr + l * hn_l + row * hn_r + g * hn_g, 0, mask=live)
    if SMOOTH != 0 and HAS_SCORES:
        hrow = hist_ptr + l * h_l + row * h_r + g * h_g + j.to(tl.int64) * h_p
        hn = hn_ptr + l * hn_l + row * hn_r + g * hn_g
        prev_n = tl.load(hn)
        old = j < prev_n
        prev = tl.load(hrow, mask=old, other=0.0)
        if SMOOTH == 1:  # ema (launched without fp fusion: two products and an add, as in the reference)
            mixed = tl.where(old, b1 * prev + b2 * acc, acc)
            tl.store(hrow, mixed, mask=readable & live)
        else:  # max of this and the previous verify; the history keeps this verify's own scores
            mixed = tl.where(old, tl.maximum(prev, acc), acc)
            tl.store(hrow, acc, mask=readable & live)
        tl.store(hn, scored.to(prev_n.dtype), mask=live)
        acc = mixed

    # counts, in fp32 for ceil(ratio * n) exactly as the reference
    sinks = tl.minimum(n, SINK_PAGES)
    by_ratio = tl.minimum(tl.math.ceil(ratio * n.to(tl.float32)), n.to(tl.float32)).to(tl.int32)
    k = tl.minimum(tl.maximum(by_ratio, MIN_PAGES), n)
    k = tl.minimum(tl.maximum(k, sinks), KCAP)
    sinks = tl.minimum(sinks, k)
    k_rem = k - sinks
    # forced newest pages: the recent share, and every page without a score
    r = tl.math.floor(share * k_rem.to(tl.float32)).to(tl.int32)
    forced_from = n - tl.maximum(r, n - scored)
    acc = tl.where(j >= forced_from, float("inf"), acc)
    cand = (j < n) & (j >= sinks)

    # 0.0 + x never yields -0.0, but a compiler folding the first add away would: make -0.0 tie with +0.0 anyway
    acc = tl.where(acc == 0.0, 0.0, acc)
    bits = acc.to(tl.uint32, bitcast=True)
    key = bits ^ tl.where((bits >> 31) != 0, 0xFFFFFFFF, 0x80000000).to(tl.uint32)
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
    phys = tl.load(pt_ptr + trow * pt_r + j.to(tl.int64) * pt_p, mask=chosen & live, other=0).to(tl.int64) // DIV
    out = ids_ptr + l * o_l + row * o_r + g * o_g
    tl.store(out + slot * o_k, phys.to(ids_ptr.dtype.element_ty), mask=chosen & live)
    kk = tl.arange(0, BLOCK_K)
    tl.store(out + kk.to(tl.int64) * o_k, tl.zeros([BLOCK_K], dtype=tl.int32), mask=(kk >= k) & (kk < KCAP) & live)
    tl.store(cnt_ptr + l * c_l + row * c_r, k, mask=live & (g == 0))


def _check(cond, msg):
    if not cond:
        raise ValueError(msg)


def _int_vec(t, B, name):
    _check(t.shape == (B,) and t.dtype in (torch.int32, torch.int64), f"{name} must be [B={B}] int32/int64, got "
           f"{tuple(t.shape)} {t.dtype}")


def select_topk_pages(scores, num_eligible, page_table, ratio, min_pages, sink_pages, out_ids=None, out_count=None,
                      *, per_head=False, rows=None, table_rows=None, page_div=1, num_scored=None, recent_share=0.0,
                      skip=None, hist=None, hist_n=None, smoothing="none", ema=0.5):
    """scores [L, B, Hkv, MAXP] fp32 (or None: no scores), num_eligible [B], page_table [R', W]
    -> (out_ids [L, R, KCAP] ([L, R, Hkv, KCAP] with per_head), out_count [L, R]).

    The rule and every option: select_topk_pages_ref's docstring. KCAP = out_ids.shape[-1] (MAXP when out_ids is
    None, then R = B); new outputs are int32. Python scalars are runtime kernel arguments, never specialized on: one
    compiled variant per call site whatever the batch size (docs/CONTRACTS.md)."""
    _int_vec(num_eligible, num_eligible.shape[0], "num_eligible")
    B = num_eligible.shape[0]
    dev = num_eligible.device
    if scores is not None:
        _check(scores.dim() == 4 and scores.dtype == torch.float32 and scores.shape[1] == B,
               f"scores must be [L, B={B}, Hkv, MAXP] fp32, got {tuple(scores.shape)} {scores.dtype}")
        L, _, H, MAXP = scores.shape
    else:
        _check(out_ids is not None, "select_topk_pages(scores=None) needs out_ids (it gives the number of layers)")
        L, H, MAXP = out_ids.shape[0], (out_ids.shape[2] if per_head else 1), page_table.shape[1]
    G = H if per_head else 1
    _check(page_table.dim() == 2 and page_table.dtype in (torch.int32, torch.int64),
           f"page_table must be [R, W] int32/int64, got {tuple(page_table.shape)} {page_table.dtype}")
    if table_rows is None:
        _check(page_table.shape[0] == B, f"page_table has {page_table.shape[0]} rows, expected B={B}")
    else:
        _int_vec(table_rows, B, "table_rows")
    if rows is not None:
        _int_vec(rows, B, "rows")
    if num_scored is not None:
        _int_vec(num_scored, B, "num_scored")
    if out_ids is None:
        out_ids = torch.empty((L, B, G, MAXP) if per_head else (L, B, MAXP), dtype=torch.int32, device=dev)
    R = out_ids.shape[1]
    want = (L, R, G) if per_head else (L, R)
    _check(out_ids.dim() == len(want) + 1 and tuple(out_ids.shape[:-1]) == want
           and out_ids.dtype in (torch.int32, torch.int64),
           f"out_ids must be [{', '.join(map(str, want))}, KCAP] int32/int64, got {tuple(out_ids.shape)} {out_ids.dtype}")
    _check(rows is not None or R == B, f"out_ids has {R} rows for B={B} requests: give rows")
    if out_count is None:
        out_count = torch.empty((L, R), dtype=torch.int32, device=dev)
    _check(out_count.shape == (L, R) and out_count.dtype in (torch.int32, torch.int64),
           f"out_count must be [L={L}, R={R}] int32/int64, got {tuple(out_count.shape)} {out_count.dtype}")
    _check(min(min_pages, sink_pages) >= 0 and ratio >= 0 and page_div >= 1,
           f"need ratio >= 0, min_pages >= 0, sink_pages >= 0, page_div >= 1; got {ratio}, {min_pages}, "
           f"{sink_pages}, {page_div}")
    smooth = SMOOTHING[smoothing] if hist is not None else 0
    if smooth:
        _check(hist.dtype == torch.float32 and hist.dim() == 4 and tuple(hist.shape[:3]) == (L, R, G)
               and hist.shape[3] >= MAXP, f"hist must be [L={L}, R={R}, {G}, >= {MAXP}] fp32, got "
               f"{tuple(hist.shape)} {hist.dtype}")
        _check(hist_n is not None and tuple(hist_n.shape) == (L, R, G) and hist_n.dtype in (torch.int32, torch.int64),
               f"hist_n must be [L={L}, R={R}, {G}] int32/int64")
    if skip is not None:
        _check(skip.shape == (B,) and skip.dtype == torch.bool, f"skip must be [B={B}] bool")
    devs = {t.device for t in (scores, num_eligible, page_table, out_ids, out_count, rows, table_rows, num_scored,
                               skip, hist if smooth else None, hist_n if smooth else None) if t is not None}
    _check(len(devs) == 1, f"all tensors must be on one device, got {devs}")
    if L * B == 0:
        return out_ids, out_count
    kcap = out_ids.shape[-1]
    block_p = triton.next_power_of_2(max(MAXP, 1))
    dummy = num_eligible  # stands in for absent tensors: the kernel never touches them (constexpr flags)
    sc = scores if scores is not None else dummy.view(1, 1, 1, -1)
    hs, hn = (hist, hist_n) if smooth else (dummy.view(1, 1, 1, -1), dummy.view(1, 1, -1))
    _select_topk_pages_kernel[(L * B * G,)](
        scores_ptr=sc, ne_ptr=num_eligible, ns_ptr=num_scored if num_scored is not None else dummy,
        pt_ptr=page_table, trow_ptr=table_rows if table_rows is not None else dummy,
        row_ptr=rows if rows is not None else dummy, skip_ptr=skip.view(torch.uint8) if skip is not None else dummy,
        hist_ptr=hs, hn_ptr=hn, ids_ptr=out_ids, cnt_ptr=out_count,
        s_l=sc.stride(0), s_b=sc.stride(1), s_h=sc.stride(2), s_p=sc.stride(3),
        pt_r=page_table.stride(0), pt_p=page_table.stride(1),
        h_l=hs.stride(0), h_r=hs.stride(1), h_g=hs.stride(2), h_p=hs.stride(3),
        hn_l=hn.stride(0), hn_r=hn.stride(1), hn_g=hn.stride(2),
        o_l=out_ids.stride(0), o_r=out_ids.stride(1), o_g=out_ids.stride(2) if per_head else 0,
        o_k=out_ids.stride(-1), c_l=out_count.stride(0), c_r=out_count.stride(1),
        B=B, G=G, N_MAX=min(MAXP, page_table.shape[1]), KCAP=kcap, DIV=int(page_div),
        ratio=float(ratio), share=float(recent_share), b1=float(ema), b2=float(1.0 - ema),
        MIN_PAGES=int(min_pages), SINK_PAGES=int(sink_pages),
        HKV=H, HAS_SCORES=scores is not None, PER_HEAD=bool(per_head), HAS_SCORED=num_scored is not None and
        scores is not None, HAS_TROWS=table_rows is not None, HAS_ROWS=rows is not None, HAS_SKIP=skip is not None,
        SMOOTH=smooth, BLOCK_P=block_p, BLOCK_K=triton.next_power_of_2(max(kcap, 1)),
        # 16 scores per thread at most: 4 warps up to 2048 pages, 8 at 4096, 16 beyond
        num_warps=max(4, min(16, block_p // 512)),
        enable_fp_fusion=False,  # the ema mix must round like the reference (no fused multiply-add)
    )
    return out_ids, out_count
