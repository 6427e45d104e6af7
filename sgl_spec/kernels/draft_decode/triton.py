"""Triton ``draft_decode``: split-KV, GQA-aware decode attention over the 4-bit upper plane (+ the hot ring).

Contract in docs/CONTRACTS.md; page format in sgl_spec/kvcache/format.py; pure-torch twin in ref.py; design and the
reasons behind the launch rules in docs/KERNELS.md "draft_decode".

Stage 1 (triton_pages.py), grid ``(B, Hkv, 1 + NUM_SPLITS)``: program 0 attends to the hot tokens (triton_hot.py),
programs ``s >= 1`` to a share of the request's page list; each writes (m, l, unnormalized acc) per query head.
Stage 2 (merge.py) merges the 1 + NUM_SPLITS partials per query head. With the Gluon engine the page splits are
gluon_pages.py's, the hot tokens either stage 1's program 0 as a launch of its own (``_launch_hot``) or programs of
the Gluon page launch (gluon_hot.py). NUM_SPLITS (launch.py) depends only on shapes and the SM count (no host sync;
CUDA-graph capturable with fixed shapes, num_pages varies as data); splits beyond a short list find no pages and
write an empty partial.
"""
from __future__ import annotations

import os

import torch
import triton

from sgl_spec.kernels.draft_decode.launch import (FLAT_SCALES_MAX_P, GLUON_FUSED_HOT_PAGES, GLUON_HEAD_DIM,
                                                  GLUON_HOT_LAUNCH, GLUON_HOT_MIN_PAIRS, GLUON_HOT_TOKENS,
                                                  GLUON_MAX_GROUP, GLUON_MERGE_BLOCKS, GLUON_PAGE_SIZE,
                                                  GLUON_PAGE_SIZES, MERGE_CHUNK, MERGE_TILE, MIN_PAGES_PER_SPLIT,
                                                  NUM_STAGES, RULES, DraftLaunch, _sm_count, gluon_draft_shapes,
                                                  gluon_hot_last, gluon_programs_per_sm, gluon_stream_stages,
                                                  launch_config, num_splits_for)
from sgl_spec.kernels.draft_decode.triton_hot import RING
from sgl_spec.kernels.draft_decode.merge import _draft_decode_merge_kernel
from sgl_spec.kernels.draft_decode.triton_pages import _draft_decode_kernel
from sgl_spec.kernels.common.nibble_words import key_frag_fits
from sgl_spec.kernels.common.pdl import pdl_kwargs
from sgl_spec.kvcache.format import PageStore

_LOG2E = 1.4426950408889634


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _check(name, t, shape, dtypes, device):
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"draft_decode: {name} has shape {tuple(t.shape)}, expected {tuple(shape)}")
    if t.dtype not in dtypes:
        raise ValueError(f"draft_decode: {name} has dtype {t.dtype}, expected one of {dtypes}")
    if t.device != device:
        raise ValueError(f"draft_decode: {name} is on {t.device}, expected {device}")
    if t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"draft_decode: {name} needs a contiguous last dim")


def key_frag_on(P, half, num_warps, gpad) -> bool:
    """The kernel's KF: keys in the wgmma A fragment's order where the tile is the one nibble_words' fragment
    helpers hard-code (P = 64, D = 128, 4 warps) and the head group pads to 16 columns."""
    return key_frag_fits(P, half, num_warps) and gpad == 16


def hot_native(q_dtype, hot_dtype) -> bool:
    """The hot-token dots on the 16-bit operands as stored (64 tokens a step); fp32 models, and bf16 under the
    interpreter (which cannot dot bf16), take fp32 operands (32 a step)."""
    return torch.float32 not in (q_dtype, hot_dtype) and not (_interpreting() and hot_dtype == torch.bfloat16)


def draft_decode(q, store: PageStore, page_ids, num_pages, hot_k, hot_v, hot_slot, hot_start, hot_len, sm_scale,
                 out=None, new_k=None, new_v=None, engine=None, launch: DraftLaunch | None = None):
    """See docs/CONTRACTS.md. ``new_k`` / ``new_v`` [B, Hkv, D]: the query token's own K/V, written into the ring at
    position hot_start + hot_len - 1 by this launch (the hot-token program) before it is read, instead of by a
    ring_write launch. ``engine="gluon"``: the page programs run as gluon_pages.py (one warp a page; where
    launch.gluon_draft_support says they run), the hot-token programs and the merge as here. ``launch``: a
    DraftLaunch fixing launch parameters (tests, benchmarks); None: the rules of launch.py."""
    lc = RULES if launch is None else launch
    # ---- checks
    if q.dim() != 3:
        raise ValueError(f"draft_decode: q must be [B, Hq, D], got {tuple(q.shape)}")
    B, Hq, D = q.shape
    dev = q.device
    NP, Hkv, P, half = store.k_upper.shape
    if D % 2 or half * 2 != D or Hq % Hkv:
        raise ValueError(f"draft_decode: q {tuple(q.shape)} does not match pages {tuple(store.k_upper.shape)}")
    if half % 4:
        raise ValueError(f"draft_decode: the planes are read as 32-bit words, head_dim must be a multiple of 8, got {D}")
    fl = (torch.bfloat16, torch.float16, torch.float32)
    _check("q", q, (B, Hq, D), fl, dev)
    for name in ("k_upper", "v_upper"):
        _check(name, getattr(store, name), (NP, Hkv, P, half), (torch.uint8,), dev)
    for name in ("k_scale", "k_zero"):
        _check(name, getattr(store, name), (NP, Hkv, D), (torch.float16,), dev)
    for name in ("v_scale", "v_zero"):
        _check(name, getattr(store, name), (NP, Hkv, P), (torch.float16,), dev)
    # [B, KCAP]: one page list per request (every kv head reads it); [B, Hkv, KCAP]: one per kv head (same count)
    maxp = page_ids.shape[-1] if page_ids.dim() in (2, 3) else -1
    _check("page_ids", page_ids, (B, maxp) if page_ids.dim() != 3 else (B, Hkv, maxp), (torch.int32,), dev)
    s_ph = page_ids.stride(1) if page_ids.dim() == 3 else 0
    for name, t in (("num_pages", num_pages), ("hot_slot", hot_slot), ("hot_start", hot_start),
                    ("hot_len", hot_len)):
        _check(name, t, (B,), (torch.int32,), dev)
        if not t.is_contiguous():
            raise ValueError(f"draft_decode: {name} must be contiguous")
    _check("hot_k", hot_k, (hot_k.shape[0], RING, P, Hkv, D), fl, dev)
    _check("hot_v", hot_v, tuple(hot_k.shape), (hot_k.dtype,), dev)
    if store.k_upper.stride(-2) != half or store.v_upper.stride() != store.k_upper.stride():
        raise ValueError("draft_decode: k_upper/v_upper need equal strides and packed [P, D/2] rows")
    ku, vu = store.k_upper.view(torch.int32), store.v_upper.view(torch.int32)  # words: 4 packed bytes
    ks32, kz32 = store.k_scale.view(torch.int32), store.k_zero.view(torch.int32)  # fp16 pairs of channels
    if vu.stride() != ku.stride():
        raise ValueError("draft_decode: k_upper/v_upper need equal strides (in 32-bit words)")
    if store.k_zero.stride() != store.k_scale.stride() or store.v_zero.stride() != store.v_scale.stride() \
            or store.k_scale.stride(-1) != 1:
        raise ValueError("draft_decode: scale and zero tensors need equal strides")
    if hot_v.stride() != hot_k.stride():
        raise ValueError("draft_decode: hot_k and hot_v need equal strides")
    if (new_k is None) != (new_v is None):
        raise ValueError("draft_decode: give both new_k and new_v, or neither")
    if new_k is not None:
        _check("new_k", new_k, (B, Hkv, D), fl, dev)
        _check("new_v", new_v, (B, Hkv, D), fl, dev)
        if new_k.stride() != new_v.stride():
            raise ValueError("draft_decode: new_k and new_v need equal strides")

    # ---- allocate
    if out is None:
        out = torch.empty_like(q)
    _check("out", out, (B, Hq, D), (q.dtype,), dev)
    if B == 0:
        return out
    G = Hq // Hkv
    gluon = engine == "gluon"
    if gluon:
        why = gluon_draft_shapes(P, D, G) or ("" if dev.type == "cuda" and not _interpreting() else f"on {dev}")
        if why:
            raise ValueError(f"draft_decode: engine='gluon' needs P in {GLUON_PAGE_SIZES}, head_dim {GLUON_HEAD_DIM}, "
                             f"G <= {GLUON_MAX_GROUP} and a CUDA device: {why}")
    if engine not in (None, "triton", "gluon"):
        raise ValueError(f"draft_decode: engine must be 'triton' or 'gluon', got {engine!r}")
    gl_nr = None
    prefetch, maxnreg = lc.prefetch, lc.maxnreg
    if gluon:  # maxnreg then caps the Gluon page programs; the Triton hot-token programs keep the defaults
        gl_nr, prefetch, maxnreg = (int(maxnreg) if maxnreg else None), None, None
    gpad = max(16, triton.next_power_of_2(G))
    cfg_nw, cfg_st, cfg_pf, cfg_nr, ppsm = launch_config(P, gpad)
    nw = int(lc.num_warps) if lc.num_warps else cfg_nw
    pf = int(cfg_pf if prefetch is None else prefetch)
    if pf not in (0, 1):
        raise ValueError(f"draft_decode: prefetch must be 0 or 1, got {prefetch}")
    fs = P <= FLAT_SCALES_MAX_P
    st = int(lc.num_stages) if lc.num_stages else (1 if pf else (cfg_st if cfg_st > 1 else NUM_STAGES))
    if gluon and gpad <= 16 and B * Hkv >= GLUON_HOT_MIN_PAIRS:  # this launch runs the hot-token programs only
        nw = int(lc.num_warps) if lc.num_warps else GLUON_HOT_LAUNCH[0]
        st = int(lc.num_stages) if lc.num_stages else GLUON_HOT_LAUNCH[1]
    nr = cfg_nr if maxnreg is None else (int(maxnreg) or None)  # 0: no cap
    if not gluon and (lc.stages or lc.hot_last or lc.fused_hot or lc.stream_tma):
        raise ValueError("draft_decode: stages, stream_tma, fused_hot and hot_last (the shared-memory page ring, "
                         "the hot-token programs' place) are launch parameters of engine='gluon'")
    mb = int(lc.merge_blocks or (GLUON_MERGE_BLOCKS if gluon else 1))
    if mb < 1 or triton.next_power_of_2(D) % mb:
        raise ValueError(f"draft_decode: merge_blocks must divide head_dim {D}'s power-of-two tile, got {mb}")
    # merge step: MERGE_CHUNK partials, or as many as a MERGE_TILE-element step holds with narrower channel blocks
    mc = triton.next_power_of_2(int(lc.merge_chunk or max(MERGE_CHUNK, MERGE_TILE * mb // triton.next_power_of_2(D))))
    sub = P // GLUON_PAGE_SIZE if gluon else 1  # Gluon: a page as P / 64 sub-pages of 64 tokens, each a page program's
    mpps = lc.min_pages_per_split or MIN_PAGES_PER_SPLIT  # step, so the list is sub times longer
    ring = gluon_stream_stages(P, B, Hkv, maxp * sub, _sm_count(dev), lc.stages, lc.num_splits, lc.programs_per_sm,
                               mpps) if gluon else 0
    ppsm = int(lc.programs_per_sm or (gluon_programs_per_sm(ring) if gluon else ppsm))
    ns = int(lc.num_splits) if lc.num_splits is not None else num_splits_for(B, Hkv, maxp * sub, _sm_count(dev),
                                                                           ppsm, mpps)
    if ns < 1:
        raise ValueError(f"draft_decode: num_splits must be >= 1, got {ns}")
    hn = hot_native(q.dtype, hot_k.dtype)
    hb = int(lc.hot_block or (64 if hn else 32))
    if hb < 16 or hb & (hb - 1):
        raise ValueError(f"draft_decode: hot_block must be a power of two >= 16, got {hb}")
    # the hot-token programs inside the page launch (16-bit rings): few pairs and short splits (GLUON_FUSED_HOT_PAGES)
    lo_p, hi_p = GLUON_FUSED_HOT_PAGES.get(P, (1, 0))
    fused = gluon and hn and bool(lc.fused_hot if lc.fused_hot is not None else B * Hkv < GLUON_HOT_MIN_PAIRS
                                  and lo_p <= triton.cdiv(maxp * sub, ns) <= hi_p)
    hs = RING * P // GLUON_HOT_TOKENS if fused else 0  # hot-token programs a pair in the page launch
    last = gluon and gluon_hot_last(ring, fused, lc.hot_last)
    npart = ns + max(hs, 1)
    m_part = torch.empty((B, Hq, npart), dtype=torch.float32, device=dev)
    l_part = torch.empty_like(m_part)
    acc_part = torch.empty((B, Hq, npart, D), dtype=torch.float32, device=dev)

    # ---- launch
    block_c = max(16, triton.next_power_of_2(half))  # 4 x the word tile width
    nk = hot_k if new_k is None else new_k
    nv = hot_v if new_v is None else new_v
    s_nb, s_nh = (0, 0) if new_k is None else (new_k.stride(0), new_k.stride(1))
    hot_args = (q, ku, vu, ks32, kz32, store, page_ids, s_ph, num_pages, maxp, hot_k, hot_v, hot_slot, hot_start,
                hot_len, nk, nv, s_nb, s_nh, m_part, l_part, acc_part, sm_scale, G, gpad, half, block_c, P, ns, hb, hn,
                pf, fs, nw, st, nr, new_k is not None, gluon, dev)
    if not fused and not last:
        _launch_hot(*hot_args)
    if gluon:
        from sgl_spec.kernels.draft_decode.gluon_pages import _draft_pages_kernel
        hot = dict(hk_ptr=hot_k, hv_ptr=hot_v, hvw_ptr=hot_v.view(torch.int32), s_hs=hot_k.stride(0),
                   s_hr=hot_k.stride(1), s_hn=hot_k.stride(2), s_hh=hot_k.stride(3), hslot_ptr=hot_slot,
                   hstart_ptr=hot_start, hlen_ptr=hot_len, nk_ptr=nk, nv_ptr=nv, s_nb=s_nb, s_nh=s_nh, HS=hs,
                   WRITE_NEW=new_k is not None) if fused else {}
        _draft_pages_kernel[(ns + hs, B * Hkv)](
            q, q.stride(0), q.stride(1), ku, vu, ku.stride(0), ku.stride(1), ks32, kz32, ks32.stride(0),
            ks32.stride(1), store.v_scale, store.v_zero, store.v_scale.stride(0), store.v_scale.stride(1),
            page_ids, page_ids.stride(0), s_ph, num_pages, maxp, m_part, l_part, acc_part,
            float(sm_scale) * _LOG2E, Hkv, G=G, NUM_SPLITS=ns, NPAGES=NP, SUB=sub, STAGES=ring,
            num_warps=1, **_ring_tma(ring, lc.stream_tma, ku, vu, ks32, kz32, store),
            HOT_LAST=last, **hot, **({"maxnreg": gl_nr} if gl_nr else {}), **pdl_kwargs(dev))
    if last:
        _launch_hot(*hot_args, hot_last=True)
    _draft_decode_merge_kernel[(B * Hq, mb)](
        m_ptr=m_part, l_ptr=l_part, acc_ptr=acc_part, out_ptr=out, s_ob=out.stride(0), s_oh=out.stride(1), HQ=Hq,
        NPART=npart, BLOCK_S=triton.next_power_of_2(npart), CHUNK=min(mc, triton.next_power_of_2(npart)),
        D=D, BLOCK_D=triton.next_power_of_2(D) // mb, num_warps=4, **pdl_kwargs(dev),
    )
    return out


def _ring_tma(ring, stream_tma, ku, vu, ks32, kz32, store) -> dict:
    """The page launch's TMA keywords where its ring runs and the tensors can be addressed as TMA rows
    (gluon_stream.py tma_args); else none: the cp.async ring. ``stream_tma=False`` (DraftLaunch) takes the cp.async
    ring anyway."""
    if not ring or stream_tma is False:
        return {}
    from sgl_spec.kernels.draft_decode.gluon_stream import tma_args

    return tma_args(ku, vu, ks32, kz32, store.v_scale, store.v_zero) or {}


def _launch_hot(q, ku, vu, ks32, kz32, store, page_ids, s_ph, num_pages, maxp, hot_k, hot_v, hot_slot, hot_start,
                hot_len, nk, nv, s_nb, s_nh, m_part, l_part, acc_part, sm_scale, G, gpad, half, block_c, P, ns, hb,
                hn, pf, fs, nw, st, nr, write_new, gluon, dev, hot_last=False):
    """The Triton launch: every split (engine "triton"), or the hot-token programs only (engine "gluon")."""
    B, Hkv = q.shape[0], store.k_upper.shape[1]
    _draft_decode_kernel[(B, Hkv, 1 if gluon else ns + 1)](
        q_ptr=q, s_qb=q.stride(0), s_qh=q.stride(1),
        ku_ptr=ku, vu_ptr=vu, s_up=ku.stride(0), s_uh=ku.stride(1),
        ks_ptr=ks32, kz_ptr=kz32, s_ksp=ks32.stride(0), s_ksh=ks32.stride(1),
        vs_ptr=store.v_scale, vz_ptr=store.v_zero, s_vsp=store.v_scale.stride(0), s_vsh=store.v_scale.stride(1),
        pid_ptr=page_ids, s_pb=page_ids.stride(0), s_ph=s_ph, np_ptr=num_pages, MAXP=maxp,
        hk_ptr=hot_k, hv_ptr=hot_v, s_hs=hot_k.stride(0), s_hr=hot_k.stride(1), s_hn=hot_k.stride(2),
        s_hh=hot_k.stride(3),
        hslot_ptr=hot_slot, hstart_ptr=hot_start, hlen_ptr=hot_len,
        nk_ptr=nk, nv_ptr=nv, s_nb=s_nb, s_nh=s_nh,
        m_ptr=m_part, l_ptr=l_part, acc_ptr=acc_part,
        qk_scale=float(sm_scale) * _LOG2E,
        G=G, GPAD=gpad, HALF=half, BLOCK_C=block_c, P=P,
        NUM_SPLITS=ns, HOT_PREC="ieee" if torch.float32 in (q.dtype, hot_k.dtype) else "tf32", HOT_BLOCK=hb,
        HOT_NATIVE=hn, USE_ASM=not _interpreting(), PREFETCH=pf, FLAT_SCALES=fs,
        KF=key_frag_on(P, half, nw, gpad), WRITE_NEW=write_new, EARLY_LAUNCH=gluon and not hot_last,
        HOT_LAST=hot_last,
        num_warps=nw, num_stages=st, **({"maxnreg": nr} if nr and dev.type == "cuda" else {}), **pdl_kwargs(dev),
    )
