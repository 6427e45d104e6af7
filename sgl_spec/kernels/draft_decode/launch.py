"""``draft_decode``'s launch configuration and split rule, from shapes and the SM count only (no host sync, so a
launch stays CUDA-graph capturable; the page counts vary as data). Why each number: docs/KERNELS.md "draft_decode"."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

import torch
import triton

from sgl_spec.kernels.engine import GLUON_PAGE_SIZES, gluon_device_support

# page size -> (num_warps, num_stages, prefetch, maxnreg, programs_per_sm): P <= 64 one 4-warp wgmma tile with one
# page prefetched in registers at 128 registers (4 programs an SM); P = 128 8 warps and Triton's cp.async pipeline
LAUNCH = {
    32: (4, 1, True, 128, 4),
    64: (4, 1, True, 128, 4),
    128: (8, 2, False, 128, 4),
}
FLAT_SCALES_MAX_P = 64  # up to this page size a program loads its key scales once, flat (not copied per thread)
MIN_PAGES_PER_SPLIT = 1  # splits down to one page: a batch-1 draft fills the GPU
MERGE_CHUNK = 64  # partials a merge step reads with one channel block
MERGE_TILE = 8192  # elements of a merge step (64 fp32 a thread at 4 warps): 4 channel blocks take 256 partials at once
MAX_SPLITS = 256
SPLIT_SLACK = 0.02  # more waves must be this much cheaper to win
MAX_WAVES = 4
# splits of at most SHORT_SPLIT_PAGES pages (sparse drafts) take the makespan model's count: a page program costs
# MODEL_OVERHEAD + its pages, a hot-token program MODEL_HOT (page-times, fitted to H100 sweeps)
SHORT_SPLIT_PAGES = 16
MODEL_OVERHEAD = 4
MODEL_HOT = 3
NUM_STAGES = 3  # Triton pipeline depth without the register prefetch where launch_config says nothing


@dataclass(frozen=True)
class DraftLaunch:
    """Fixed launch parameters for tests and benchmarks (``draft_decode(..., launch=DraftLaunch(...))``); a field
    left None takes the rules of this module. ``num_splits``; ``num_warps`` / ``num_stages`` / ``maxnreg`` (0: no
    cap) / ``prefetch`` (0/1: the Triton page programs' register prefetch) / ``programs_per_sm`` /
    ``min_pages_per_split`` (the split rule's inputs); ``merge_chunk`` (partials a merge step reads) and
    ``merge_blocks`` (channel blocks a merge program); ``hot_block`` (hot tokens a step, a power of two >= 16);
    engine="gluon" only: ``stages`` (0: one page prefetched in registers, 2-4: a shared-memory ring of that many
    slots), ``stream_tma`` (the ring's copies by TMA or by every lane's cp.async, the form for tensors TMA cannot
    address), ``fused_hot`` (the hot-token programs inside the page launch), ``hot_last`` (the hot-token launch
    after the page launch instead of before it)."""
    num_splits: Optional[int] = None
    num_warps: Optional[int] = None
    num_stages: Optional[int] = None
    maxnreg: Optional[int] = None
    prefetch: Optional[int] = None
    programs_per_sm: Optional[int] = None
    min_pages_per_split: Optional[int] = None
    merge_chunk: Optional[int] = None
    merge_blocks: Optional[int] = None
    hot_block: Optional[int] = None
    stages: Optional[int] = None
    stream_tma: Optional[bool] = None
    fused_hot: Optional[bool] = None
    hot_last: Optional[bool] = None


RULES = DraftLaunch()


@functools.lru_cache(maxsize=None)
def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 8  # interpreter: small, so tests still exercise several splits
    return torch.cuda.get_device_properties(device).multi_processor_count


def launch_config(page_size: int, gpad: int):
    """(num_warps, num_stages, prefetch, maxnreg, programs_per_sm); G > 16 (GPAD > 16) doubles the score tile:
    8 warps, Triton's pipeline."""
    cfg = LAUNCH.get(page_size, LAUNCH[128])
    if gpad > 16:
        cfg = (8, 2, False, 128, 2)
    return cfg


@functools.lru_cache(maxsize=4096)  # called at every launch; the short-split search would cost ~30-70 us a call
def num_splits_for(batch: int, num_kv_heads: int, max_pages: int, sm_count: int, programs_per_sm: int = 3,
                   min_pages_per_split: int = MIN_PAGES_PER_SPLIT) -> int:
    """Page splits per (request, KV head), from shapes only. With S = programs_per_sm * sm_count program slots and
    n = B*Hkv*splits equal page programs, the time goes as waves / splits = ceil(n / S) / splits: among the split
    counts that exactly fill 1 .. MAX_WAVES waves, take the cheapest (more waves must win by SPLIT_SLACK). E.g.
    B=1, Hkv=8, S=396: 49 splits, one wave; B=32: 3 splits in two full waves (1 split would leave a third of the
    slots idle). The B*Hkv hot-token programs are not counted: they
    are launched first and are short (B=8, 256k, P=64: 1.78 ms with them counted, 1.47 ms without), except where the
    splits are short (SHORT_SPLIT_PAGES): there the split count with the least modelled makespan (``_makespan``)
    is taken. Last, the count is lowered to the splits that a full list
    actually fills (cdiv(max_pages, per) for per = cdiv(max_pages, splits): the same pages a split, no empty
    programs)."""
    if max_pages <= 0:
        return 1
    bh = max(1, batch * num_kv_heads)
    slots = max(1, programs_per_sm * sm_count)
    cap = max(1, min(triton.cdiv(max_pages, max(1, min_pages_per_split)), MAX_SPLITS))
    best, best_cost = 1, triton.cdiv(bh, slots)
    for waves in range(1, MAX_WAVES + 1):  # the most splits that fill `waves` full waves
        ns = min(waves * slots // bh, cap)
        if ns >= 1 and triton.cdiv(bh * ns, slots) / ns < best_cost * (1 - SPLIT_SLACK):
            best, best_cost = ns, triton.cdiv(bh * ns, slots) / ns
    if triton.cdiv(max_pages, best) <= SHORT_SPLIT_PAGES:
        best = min(range(1, cap + 1), key=lambda ns: (_makespan(bh, max_pages, ns, slots), ns))
    return triton.cdiv(max_pages, triton.cdiv(max_pages, best))


def _makespan(bh: int, max_pages: int, splits: int, slots: int) -> float:
    """Modelled time (page-times) of bh hot-token programs (one a (request, KV head)) and bh*n page programs (n = the
    splits a full list fills) on ``slots`` equal slots, hot programs first (launch order), each slot taking the next
    program when free."""
    per = triton.cdiv(max_pages, splits)
    n_page, n_hot, d = bh * triton.cdiv(max_pages, per), bh, MODEL_OVERHEAD + per
    hot_waves, hot_tail = divmod(n_hot, slots)  # full waves of hot programs, then a partial one
    t0 = hot_waves * MODEL_HOT
    early = slots - hot_tail if hot_tail else slots  # slots free at t0; the others free at t0 + MODEL_HOT
    late = hot_tail
    t, done = t0, 0
    while True:  # rounds: `early` programs end at t0 + k d, `late` ones at t0 + MODEL_HOT + k d
        done += early
        if done >= n_page:
            return t + d
        done += late
        if done >= n_page:
            return t + MODEL_HOT + d
        t += d


# engine="gluon" (gluon_pages.py): the tile its layouts hard-code; a 128-token page runs as two 64-token sub-pages
GLUON_PAGE_SIZE, GLUON_HEAD_DIM, GLUON_MAX_GROUP = 64, 128, 8
# the Triton hot-token launch beside the Gluon page programs from GLUON_HOT_MIN_PAIRS (request, KV head) pairs: 4 warps,
# 1 stage, so its programs do not hold SM slots the page warps wait for (P = 128, 128k x 8: 9% faster than launch_config's)
GLUON_HOT_LAUNCH = (4, 1)
GLUON_HOT_MIN_PAIRS = 9
GLUON_HOT_TOKENS = 64  # ring tokens a fused hot-token program (one warp): RING * P / 64 programs a pair
GLUON_PROGRAMS_PER_SM = 8  # register form: 254 registers a thread, 8 one-warp programs an SM for the split rule
GLUON_MERGE_BLOCKS = 4  # channel blocks a merge program: a batch-1 merge's 32 programs a request were the tail
# below GLUON_HOT_MIN_PAIRS pairs, with splits of GLUON_FUSED_HOT_PAGES[P] (sub-)pages and a 16-bit ring, the hot-token
# programs run inside the page launch: the page programs start ~1 us earlier (batch 1, 7% sparse: ~5% faster)
GLUON_FUSED_HOT_PAGES = {64: (2, 4), 128: (2, 16)}
# the shared-memory ring (gluon_stream.py) at these page sizes: from GLUON_STREAM_MIN_PAIRS[P] pairs whatever the split,
# else where a split holds GLUON_STREAM_MIN_SPLIT_PAGES sub-pages (one past GLUON_FUSED_HOT_PAGES[128], so the ring
# never runs beside the fused hot programs); the page phase is then bound by the memory system (P = 128 128k x 8:
# 3% faster than one page in registers)
GLUON_STREAM_PAGE_SIZES = (64, 128)
GLUON_STREAM_MIN_PAIRS = {128: 64}
GLUON_STREAM_MIN_SPLIT_PAGES = 17
GLUON_STREAM_STAGES = 2
GLUON_STREAM_SLOT_BYTES = 8960  # one 64-token (sub-)page: key + value words 8192 B, key scale/zero words 512, value 256
GLUON_SMEM_PER_SM = 232448  # an sm_90 SM's shared memory for blocks (227 KiB), 1 KiB of it reserved a block
GLUON_STREAM_MAX_PROGRAMS = 12  # the ring form: 168 registers a thread, 12 one-warp programs an SM


def gluon_stream_stages(page_size: int, batch: int, num_kv_heads: int, sub_pages: int, sm_count: int, stages=None,
                        num_splits=None, programs_per_sm=None, min_pages_per_split: int = MIN_PAGES_PER_SPLIT) -> int:
    """Slots of the Gluon page programs' shared-memory ring (0: one page prefetched in registers) for a launch of
    ``batch`` x ``num_kv_heads`` pairs over lists of ``sub_pages`` 64-token sub-pages: ``stages`` where given, else
    GLUON_STREAM_STAGES for the page sizes and launch sizes where it is faster: from GLUON_STREAM_MIN_PAIRS
    pairs (at the page sizes it names: P = 128), or from GLUON_STREAM_MIN_SPLIT_PAGES sub-pages a split, with the
    split count of the ring's programs an SM (``num_splits`` / ``programs_per_sm`` where a DraftLaunch fixes them)."""
    if stages is not None:
        if int(stages) not in (0, 2, 3, 4):
            raise ValueError(f"draft_decode: stages must be 0 (registers) or 2-4 ring slots, got {stages}")
        return int(stages)
    if page_size not in GLUON_STREAM_PAGE_SIZES:
        return 0
    if page_size in GLUON_STREAM_MIN_PAIRS and batch * num_kv_heads >= GLUON_STREAM_MIN_PAIRS[page_size]:
        return GLUON_STREAM_STAGES
    ns = int(num_splits) if num_splits is not None else num_splits_for(
        batch, num_kv_heads, sub_pages, sm_count, int(programs_per_sm or gluon_programs_per_sm(GLUON_STREAM_STAGES)),
        min_pages_per_split)
    return GLUON_STREAM_STAGES if triton.cdiv(sub_pages, max(1, ns)) >= GLUON_STREAM_MIN_SPLIT_PAGES else 0


def gluon_programs_per_sm(stages: int) -> int:
    """One-warp Gluon page programs an SM for the split rule: GLUON_PROGRAMS_PER_SM (registers) without the ring,
    else as many as the SM's shared memory holds (2 slots: 12, 3: 8, 4: 6)."""
    if not stages:
        return GLUON_PROGRAMS_PER_SM
    return min(GLUON_STREAM_MAX_PROGRAMS, GLUON_SMEM_PER_SM // (stages * GLUON_STREAM_SLOT_BYTES + 1024))


def gluon_draft_shapes(page_size: int, head_dim: int, group: int) -> str:
    """'' where the Gluon draft kernel covers the shapes, else why not (cheap: draft_decode checks it every call)."""
    if page_size not in GLUON_PAGE_SIZES or head_dim != GLUON_HEAD_DIM:
        return (f"the Gluon draft kernel covers page size {' or '.join(map(str, GLUON_PAGE_SIZES))} and head_dim "
                f"{GLUON_HEAD_DIM}, not {page_size} / {head_dim}")
    if not 1 <= group <= GLUON_MAX_GROUP:
        return f"the Gluon draft kernel covers up to {GLUON_MAX_GROUP} query heads a KV head, not {group}"
    return ""


def gluon_draft_support(device, page_size: int, head_dim: int, group: int) -> str:
    """'' where ``draft_decode(engine="gluon")`` runs, else the reason it does not (one line, for a startup error)."""
    return gluon_draft_shapes(page_size, head_dim, group) or gluon_device_support(device, "draft")


def gluon_hot_last(stages: int, fused: bool, hot_last=None) -> bool:
    """Whether the hot-token launch runs after the Gluon page launch: where the page programs take the ring
    (``stages`` > 0) its programs then fill the page launch's tail instead of holding slots the page programs wait
    for at its start; where a page is prefetched in registers (batch 1) the launch after them would sit on the path.
    ``hot_last`` (DraftLaunch) overrides; never with the hot-token programs in the page launch (``fused``)."""
    if fused:
        return False
    return bool(stages > 0 if hot_last is None else hot_last)
