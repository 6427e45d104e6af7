"""How ``verify_attention`` (``triton.py``) cuts each request's pages into split-KV programs.

Two partitions (``triton_stage1.py``'s module docstring says what each guarantees):
* ``pages_per_split``: batch-invariant (``--enable-deterministic-inference``): pages per split ``C`` from Hkv, MAXP and
  the SM count only, never B or NQ.
* ``splits_for_batch``: the server's default: a split count per request that follows B (the kernel then cuts each
  request's own pages into that many near-equal splits of at least ``C`` pages).
Figures: docs/KERNELS.md, "verify_attention".
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

# pages_per_split (GPU tuning knobs): PROGRAMS_PER_SM page programs fit an SM (registers); among split counts that
# exactly fill 1..MAX_WAVES waves of Hkv * splits programs, the cheapest (waves / splits) wins, but a split keeps at
# least MIN_TOKENS_PER_SPLIT tokens so that writing and merging its (NQ*G x D fp32) partial stays small next to the
# K/V bytes it reads. B does not enter (a row's result must not depend on its batch), so B > 1 runs B x as many.
PROGRAMS_PER_SM = 2  # at 4 warps: 255 registers a thread (ptxas, sm_90; capped at 168 it spills ~250 B a thread);
# a launch with more warps gets proportionally fewer programs an SM (same register file)
MAX_WAVES = 4
SPLIT_SLACK = 0.02
MIN_TOKENS_PER_SPLIT = 256
CPU_NUM_SMS = 4  # interpreter / CPU tensors: a few splits so the merge path is exercised
# batch_invariant=False: page splits per request follow B (splits_for_batch); a split count that needs more waves must
# be this much cheaper (fewer, longer splits amortize a program's prologue and partial: Llama-3-8B 128k x 1 takes
# 155 us in one wave of 33 splits, 188 us in four waves of 132)
SPLIT_SLACK_BATCH = 0.1
RING_COUNTED_SPLITS = 32  # splits_for_batch(ring_in_grid=None): count the ring programs from this many splits a pair


@functools.lru_cache(maxsize=None)
def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return CPU_NUM_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def pages_per_split(num_kv_heads: int, max_pages: int, page_size: int, device, programs_per_sm=None) -> int:
    """Pages per split ``C`` from Hkv, MAXP and the SM count only (and the launch's programs an SM, PROGRAMS_PER_SM
    at 4 warps): with S = programs_per_sm * SMs program slots and
    Hkv * n page programs, time goes as waves / n; take the n that fills whole waves best (B=1, Hkv=8, 132 SMs:
    49 splits, one wave)."""
    if max_pages <= 0:
        return 1
    pps = PROGRAMS_PER_SM if programs_per_sm is None else programs_per_sm
    slots = max(1, pps * _num_sms(torch.device(device)))
    cap = max(1, max_pages)
    best, best_cost = 1, float(triton.cdiv(num_kv_heads, slots))
    for waves in range(1, MAX_WAVES + 1):
        n = min(waves * slots // max(1, num_kv_heads), cap)
        cost = triton.cdiv(num_kv_heads * n, slots) / n if n >= 1 else float("inf")
        if cost < best_cost * (1 - SPLIT_SLACK):
            best, best_cost = n, cost
    return max(1, triton.cdiv(max_pages, best), MIN_TOKENS_PER_SPLIT // page_size)


def splits_for_batch(programs_per_split: int, max_splits: int, device, programs_per_sm=None,
                     ring_in_grid: bool | None = True) -> int:
    """Page splits per (request, row block, KV head) for ``batch_invariant=False``, with ``programs_per_split`` =
    B * Hkv * RB and S program slots: among split counts n that fill 1..MAX_WAVES whole waves of the programs, the
    cheapest waves / n wins; more waves must win by SPLIT_SLACK_BATCH (fewer, longer splits amortize a program's
    prologue and partial). ``ring_in_grid=True`` (the Triton engine, whose ring programs share the grid): the ring
    programs count (B * Hkv * RB * (n + 1)). ``ring_in_grid=None`` (the Gluon engine, its ring a launch of its own
    beside the page launch): only the page programs count, except where there are at most ``slots //
    (RING_COUNTED_SPLITS + 1)`` pairs (``ring_counted``: batch 1 of an 8-KV-head model), where a slot is left for
    each ring program so that it runs beside the page programs instead of after them; elsewhere the ring programs
    are a larger share of the slots than the tail they would take."""
    pps = PROGRAMS_PER_SM if programs_per_sm is None else programs_per_sm
    slots = max(1, pps * _num_sms(torch.device(device)))
    bh = max(1, programs_per_split)
    if ring_in_grid is None:
        ring_in_grid = ring_counted(bh, device, pps)
    ring = 1 if ring_in_grid else 0
    best, best_cost = 1, float(triton.cdiv((1 + ring) * bh, slots))
    for waves in range(1, MAX_WAVES + 1):
        n = min(waves * slots // bh - ring, max_splits)
        if n < 1:
            continue
        cost = triton.cdiv(bh * (n + ring), slots) / n
        if cost < best_cost * (1 - SPLIT_SLACK_BATCH):
            best, best_cost = n, cost
    return max(1, min(best, max_splits))


def ring_counted(programs_per_split: int, device, programs_per_sm=None) -> bool:
    """Whether ``splits_for_batch(ring_in_grid=None)`` counts a slot for each ring program: at most
    ``slots // (RING_COUNTED_SPLITS + 1)`` (request, KV head) pairs (batch 1 of Llama-3-8B on an H100)."""
    pps = PROGRAMS_PER_SM if programs_per_sm is None else programs_per_sm
    return max(1, programs_per_split) <= max(1, pps * _num_sms(torch.device(device))) // (RING_COUNTED_SPLITS + 1)


@triton.jit
def _split_pages(q_start, C, NS, P: tl.constexpr):
    """``C_b``: the pages of each page split of a request whose window starts at ``q_start``. Stage 1 reads with it
    and the merge finds the splits stage 1 wrote with it, so both take it from here. NS splits of C_b cover
    q_start // P + 1 >= the window's INT8 pages (NQ <= P); with NS = cdiv(MAXP, C) it is C (batch-invariant)."""
    return tl.maximum(C, (q_start // P + NS) // NS)
