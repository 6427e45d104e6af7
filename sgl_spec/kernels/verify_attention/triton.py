"""Triton ``verify_attention``: INT8-view paged attention for γ+1 query rows with fused page scores.

Semantics: docs/CONTRACTS.md and the pure-torch twin ``ref.py``; the design rules and their figures: docs/KERNELS.md,
"verify_attention".

Stage 1 (``triton_stage1.py``), grid ``(Hkv * RB, 1 + S, B)``: split 0 reads the ring (full precision), splits
``s >= 1`` the INT8 view of near-equal runs of a request's pages (``batch_invariant``: a partition independent of
the batch); page scores from the softmax's column maxima of the two score rows.
With ``engine="gluon"`` the page splits run as ``gluon_pages.py`` (launched first), and split 0 as a Gluon launch of
its own (``gluon_ring.py``; ``gluon_ring_rule``) or, for batch-invariant launches, as the stage-1 kernel's grid
``(Hkv * RB, 1, B)`` after the page launch.
Stage 2 (``merge.py``), grid ``(Hq / BLOCK_H + score programs, NQ, B)``: per row, merge the partials (m, l, acc) of
the ring split and of the page splits stage 1 wrote (their count follows from q_start and the partition; the others
are never read); the extra programs reduce the raw score values to page scores.
"""
from __future__ import annotations

import os

import torch
import triton

from sgl_spec.kernels.verify_attention import splits
from sgl_spec.kernels.common.nibble_words import key_frag_fits
from sgl_spec.kernels.common.pdl import pdl_kwargs
from sgl_spec.kernels.verify_attention.merge import _verify_merge_kernel
from sgl_spec.kernels.verify_attention.triton_stage1 import _verify_attention_kernel
from sgl_spec.kernels.verify_attention.launch_config import VerifyLaunch
from sgl_spec.kernels.verify_attention.ref import SCORE_KINDS, default_score_rows

RING = 2
LOG2E = 1.4426950408889634
NUM_WARPS = 4  # stage 1: one wgmma warpgroup (M = 64 tokens), register prefetch (num_stages=1)
MERGE_BLOCK_S = 16  # merge tile: BLOCK_H heads x 16 splits x D, ~8k fp32 (64 registers a thread at 4 warps)
MERGE_TILE = 8192
# Up to this many partials a row are merged in one step (BLOCK_S = S1 padded, BLOCK_H = MERGE_TILE // (BLOCK_S D)):
# every load issued before the first reduction, one round trip instead of three or more (batch 1: 33 splits)
MERGE_ONE_STEP_MAX = 64
SCORE_BLOCK = 1024  # (head, page) pairs per score program of the merge launch
# The widest row tile block_rows picks for a long window when the launch need not be batch-invariant: 32 rows fit
# 255 registers at 4 warps without spills; for G = 2 it holds γ+1 <= 16 rows in one block, where the G-only tile of
# 16 rows needs two blocks from γ = 8 on and so reads every page twice.
MAX_BLOCK_ROWS = 32


def gluon_ring_rule(gluon: bool, batch_invariant: bool, num_splits=None) -> bool:
    """Whether the ring split runs as the Gluon launch (``gluon_ring.py``): the Gluon engine at any batch, except
    batch-invariant launches and a fixed split count (``VerifyLaunch.num_splits``), which keep the Triton ring."""
    return gluon and not batch_invariant and num_splits is None


def merge_block_s(S1: int) -> int:
    """The merge's split tile for S1 partials a row: all of them where S1 <= MERGE_ONE_STEP_MAX (one step), else
    MERGE_BLOCK_S a loop step."""
    return max(MERGE_BLOCK_S, triton.next_power_of_2(S1)) if S1 <= MERGE_ONE_STEP_MAX else MERGE_BLOCK_S


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def block_rows(group: int, nq: int = 0) -> int:
    """Rows per program. ``nq = 0`` (batch-invariant launches): 8 window positions of G heads, padded to a tl.dot
    tile, >= 2G (both score rows), never NQ-dependent. ``nq > 0``: the same, except that a window of more rows gets
    one tile of up to MAX_BLOCK_ROWS rows instead of several row blocks (each of which reads every page again)."""
    base = max(min(64, max(16, triton.next_power_of_2(8 * group))), triton.next_power_of_2(2 * group))
    if nq * group <= base:
        return base
    return max(base, min(MAX_BLOCK_ROWS, triton.next_power_of_2(nq * group)))


def verify_attention(q, store, page_table, q_start, hot_k, hot_v, hot_slot, sm_scale, scores=None, score_rows=None,
                     out=None, score_kind="max", batch_invariant=True, engine=None, launch: VerifyLaunch | None = None):
    """See docs/CONTRACTS.md. ``batch_invariant``: the page partition of a row independent of the batch (module
    docstring). ``engine="gluon"``: the INT8 page splits run as ``gluon_pages.py`` (where
    ``gluon_rules.gluon_verify_shapes`` says they run; the same page partition, so the same partials and scores),
    the ring split as ``gluon_ring_rule`` says, the merge as here. None / "triton": this module's kernel.
    ``launch``: a fixed geometry (``VerifyLaunch``; None: the rules)."""
    # ---- checks ----------------------------------------------------------------------------------------------------
    B, NQ, Hq, D = q.shape
    NPAGES, Hkv, P, DH = store.k_upper.shape
    assert q.dtype in (torch.float16, torch.bfloat16), q.dtype
    assert D == 2 * DH and DH >= 16 and DH % 4 == 0 and Hq % Hkv == 0 and 1 <= NQ <= P, \
        (q.shape, store.k_upper.shape)  # DH % 4: the planes are read as int32 words
    G = Hq // Hkv
    assert q.stride(3) == 1
    planes = (store.k_upper, store.k_lower, store.v_upper, store.v_lower)
    for t in planes:
        assert t.dtype == torch.uint8 and t.shape == planes[0].shape and t.stride() == planes[0].stride()
    assert planes[0].stride(3) == 1 and planes[0].stride(2) == DH, "packed [P, D/2] page rows"
    words = [t.view(torch.int32) for t in planes]  # 4 packed bytes per word
    for s_, z_, shape in ((store.k_scale, store.k_zero, (NPAGES, Hkv, D)), (store.v_scale, store.v_zero,
                                                                             (NPAGES, Hkv, P))):
        assert s_.dtype == z_.dtype == torch.float16 and s_.shape == z_.shape == shape and s_.stride() == z_.stride()
        assert s_.stride(2) == 1
    ks32, kz32 = store.k_scale.view(torch.int32), store.k_zero.view(torch.int32)  # fp16 pairs of channels
    MAXP = page_table.shape[1]
    assert page_table.shape == (B, MAXP) and page_table.dtype in (torch.int32, torch.int64)
    assert q_start.shape == (B,) and q_start.dtype == torch.int32
    assert hot_slot.shape == (B,) and hot_slot.dtype in (torch.int32, torch.int64)
    assert hot_k.dim() == 5 and hot_k.shape[1:] == (RING, P, Hkv, D) and hot_k.dtype == q.dtype
    assert hot_v.shape == hot_k.shape and hot_v.dtype == q.dtype and hot_v.stride() == hot_k.stride()
    assert hot_k.stride(4) == 1
    if scores is not None:
        assert scores.shape == (B, Hkv, MAXP) and scores.dtype == torch.float32, (scores.shape, scores.dtype)
    ra, rb = default_score_rows(NQ, score_rows)
    assert score_kind in SCORE_KINDS, score_kind
    lse = score_kind == "lse"
    # ---- allocate ----------------------------------------------------------------------------------------------------
    if out is None:
        out = torch.empty_like(q)
    assert out.shape == q.shape and out.dtype == q.dtype and out.stride(3) == 1
    if B == 0:
        return out
    if engine not in (None, "triton", "gluon"):
        raise ValueError(f"verify_attention: engine must be 'triton' or 'gluon', got {engine!r}")
    gluon = engine == "gluon"
    if gluon:
        from sgl_spec.kernels.verify_attention import gluon_rules as vgr
        from sgl_spec.kernels.verify_attention import gluon_pages as vg
        why = vgr.gluon_verify_shapes(P, DH, G, NQ) or (
            "" if q.is_cuda and not _interpreting() else f"the Gluon verify kernel does not run on {q.device}")
        if why:
            raise ValueError(f"verify_attention: engine='gluon': {why}")
    num_splits = launch.num_splits if launch is not None else None
    block_m = launch.block_m if launch is not None else None
    # batch-invariant launches keep the G-only tile (a row's arithmetic must not depend on NQ); otherwise a long
    # window fits one row block where it can (block_rows)
    bm = block_rows(G, 0 if batch_invariant else NQ) if block_m is None else int(block_m)
    assert bm >= max(16, 2 * G) and bm & (bm - 1) == 0, (bm, G)  # a dot tile holding both score rows
    BLOCK_M = bm
    RB = triton.cdiv(NQ * G, BLOCK_M)
    pps = vgr.PROGRAMS_PER_SM if gluon else splits.PROGRAMS_PER_SM
    c_min = max(1, splits.MIN_TOKENS_PER_SPLIT // P)
    if num_splits is not None:
        C, NS = c_min, max(1, int(num_splits))
    elif batch_invariant:
        C = splits.pages_per_split(Hkv, MAXP, P, q.device, pps)
        NS = triton.cdiv(MAXP, C)  # then C_b = C for every q_start < MAXP * P
    else:
        C, NS = c_min, splits.splits_for_batch(B * Hkv * (1 if gluon else RB), triton.cdiv(MAXP, c_min), q.device,
                                               pps, ring_in_grid=None if gluon else True)
    gluon_ring = gluon_ring_rule(gluon, batch_invariant, num_splits)
    S1 = 1 + NS  # split 0 = ring, then page splits
    assert S1 < 65536 and B < 65536, "grid axes 1 and 2 are limited to 65535"
    pm = torch.empty((B, NQ, Hq, S1), dtype=torch.float32, device=q.device)
    pl = torch.empty_like(pm)
    pacc = torch.empty((B, NQ, Hq, S1, D), dtype=torch.float32, device=q.device)
    sc = scores if scores is not None else pm  # dummy pointer for the merge, never touched without scores
    direct = gluon and scores is not None and vgr.direct_scores(lse)  # the Gluon page programs store the scores
    raw_on = scores is not None and not direct
    # raw column maxima of the score rows [B, Hkv, MAXP, 2G]; only entries of scored pages are written and read
    raw = torch.empty((B, Hkv, MAXP, 2 * G) if raw_on else (1, 1, 1, 1), dtype=torch.float32, device=q.device)
    # ---- launch ------------------------------------------------------------------------------------------------------
    qk_scale = float(sm_scale) * LOG2E  # the logits in log2 units (every launch's partials: m in these units)
    if gluon:  # the Gluon page splits 1..NS, first: they wait for the stream and release the ring launch at once
        vg.launch_pages(q, words, ks32, kz32, store, page_table, q_start, pm, pl, pacc, raw, qk_scale, S1, C, NS, ra,
                        rb, scores is not None, lse, scores=scores if direct else None, sm_scale=sm_scale)
    if gluon_ring:
        from sgl_spec.kernels.verify_attention.gluon_ring import launch_ring

        launch_ring(q, hot_k, hot_v, hot_slot, q_start, pm, pl, pacc, qk_scale, S1, ra, rb)
    else:
        # Triton stage 1: the ring split and the page splits, or with the Gluon engine the ring split (0) only, its
        # programs taking SM slots as page programs end (AFTER_PAGES: it waits for the page launch at its end)
        _verify_attention_kernel[(Hkv * RB, 1 if gluon else S1, B)](
            Q=q, KU=words[0], KL=words[1], VU=words[2], VL=words[3], KS=ks32, KZ=kz32, VS=store.v_scale,
            VZ=store.v_zero, PT=page_table, QSTART=q_start, HK=hot_k, HV=hot_v,
            HSLOT=hot_slot, PM=pm, PL=pl, PACC=pacc, RAW=raw,
            qk_scale=qk_scale, NQ=NQ, HQ=Hq, S1=S1, C=C, NS=NS, RB=RB, ra=ra, rb=rb,
            n_front=1 if ra == rb else 2, lo_r=min(ra, rb), hi_r=max(ra, rb),
            sq_b=q.stride(0), sq_n=q.stride(1), sq_h=q.stride(2),
            s_wp=words[0].stride(0), s_wh=words[0].stride(1), s_sp=ks32.stride(0), s_sh=ks32.stride(1),
            s_vp=store.v_scale.stride(0), s_vh=store.v_scale.stride(1),
            spt_b=page_table.stride(0), spt_j=page_table.stride(1),
            shk_s=hot_k.stride(0), shk_r=hot_k.stride(1), shk_n=hot_k.stride(2), shk_h=hot_k.stride(3),
            sr_b=raw.stride(0), sr_h=raw.stride(1), G=G, P=P, DH=DH, BLOCK_DH=triton.next_power_of_2(DH),
            BLOCK_M=BLOCK_M, HAS_SCORES=raw_on, USE_ASM=not _interpreting(), SCORE_LSE=lse,
            KF=key_frag_fits(P, DH, NUM_WARPS), AFTER_PAGES=gluon,
            num_warps=NUM_WARPS, num_stages=1, **pdl_kwargs(q.device),
        )
    BLOCK_D = triton.next_power_of_2(D)
    BLOCK_S = merge_block_s(S1)
    BLOCK_H = max(1, min(triton.next_power_of_2(Hq), MERGE_TILE // (BLOCK_S * BLOCK_D)))
    n_hb = triton.cdiv(Hq, BLOCK_H)
    block_sj = min(SCORE_BLOCK, triton.next_power_of_2(Hkv * MAXP))
    n_sc = triton.cdiv(triton.cdiv(Hkv * MAXP, block_sj), NQ) if raw_on else 0  # score tiles over (pid0, pid1)
    _verify_merge_kernel[(n_hb + n_sc, NQ, B)](
        PM=pm, PL=pl, PACC=pacc, QSTART=q_start, OUT=out, RAW=raw, SCORES=sc, NQ=NQ, HQ=Hq, S1=S1, C=C, NS=NS,
        so_b=out.stride(0), so_n=out.stride(1), so_h=out.stride(2),
        n_front=1 if ra == rb else 2, sm_scale=float(sm_scale), HKV=Hkv, MAXP=MAXP, sr_b=raw.stride(0),
        ssc_b=sc.stride(0), ssc_h=sc.stride(1), ssc_j=sc.stride(2),
        P=P, D=D, BLOCK_D=BLOCK_D, BLOCK_H=BLOCK_H, BLOCK_S=BLOCK_S, G=G, N_HB=n_hb, BLOCK_SJ=block_sj,
        SCORE_LSE=lse, ONE_STEP=S1 <= BLOCK_S, VEC=(G & (G - 1)) == 0, num_warps=4,
        **pdl_kwargs(q.device),
    )
    return out

