"""``draft_decode``'s launch configuration and split rule, from shapes and the SM count only (no host sync, so a
launch stays CUDA-graph capturable; the page counts vary as data). Measurements behind the numbers:
bench/NOTES_kernels.md."""
from __future__ import annotations

import functools

import torch
import triton

# Launch configuration per page size (measured on an H100, bench/NOTES_kernels.md):
#   P <= 64: 4 warps (one wgmma warpgroup for the [64, 16] score tile), hand-written register double buffering
#            (PREFETCH, num_stages=1), registers capped at 128 (24 B of stack, none in the loop) so 4 programs fit an SM;
#   P = 128: 8 warps, Triton's cp.async pipeline (2 stages), registers capped at 128 (prefetching a 128-token page
#            in registers needs 217 a thread: one program an SM), 4 programs an SM in two waves measured best.
# programs_per_sm sets the split count (num_splits_for): one wave of page programs, never fewer than
# MIN_PAGES_PER_SPLIT pages a split when the list is full.
LAUNCH = {  # page size -> (num_warps, num_stages, prefetch, maxnreg, programs_per_sm)
    32: (4, 1, True, 128, 4),
    64: (4, 1, True, 128, 4),
    128: (8, 2, False, 128, 4),
}
# P <= 64 defaults measured on the H100 (bench/NOTES_kernels.md, iteration 5): flat key scales, 4 programs an SM at
# 128 registers, splits down to one page and a 64-wide merge step: 128k B=1 dense 109.5 -> 98.5 us, 256k B=8 1513 ->
# 1269 us, 7% sparse at 128k B=1 22.2 -> 21.9 us.
FLAT_SCALES_MAX_P = 64
MIN_PAGES_PER_SPLIT = 1
MERGE_CHUNK = 64
# elements of one merge step (partials x channels; 64 fp32 a thread at 4 warps): with the Gluon engine's 4 channel
# blocks a step takes 256 partials, i.e. a B = 1 merge reads all its partials at once (H100, bench/results/s23/
# merge_chunk: 128k x 1 dense 65.0 -> 63.6 us, 7% sparse 18.0 -> 17.2, B = 8 unchanged); 1 block: MERGE_CHUNK
MERGE_TILE = 8192
MAX_SPLITS = 256
SPLIT_SLACK = 0.02
MAX_WAVES = 4
# Short splits (at most SHORT_SPLIT_PAGES pages: sparse drafts) are chosen by a makespan model instead: there a
# program's fixed cost (q, page ids, first-page latency, partial store) and the hot-token programs are a large part of
# the time. Costs in page-times, set by hand to the H100 sweeps of bench/results/s17: a page program MODEL_OVERHEAD +
# its pages, a hot-token program MODEL_HOT; hot programs start first, page programs fill the free slots, then the
# slots the hot programs leave. Split counts alone (dev_kernels_variants_*.log, before the hot-path change): pycode-30m
# 15k x 64 26.2 -> 24.3 us (4 -> 3 splits), 4k x 128 24.0 -> 21.4 (2 -> 1), while 15k x 128 keeps 2 (1: +6%);
# Llama-3-8B 128k x 1 21.4 -> 19.6 (66 splits of which 18 empty -> 50).
SHORT_SPLIT_PAGES = 16
MODEL_OVERHEAD = 4
MODEL_HOT = 3
NUM_STAGES = 3  # Triton pipeline depth when PREFETCH is off and nothing else is said


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


# engine="gluon" (sgl_spec/kernels/draft_decode/gluon_pages.py): the shapes and machines it is built and tested for
GLUON_PAGE_SIZE, GLUON_HEAD_DIM, GLUON_MAX_GROUP = 64, 128, 8  # the tile the kernel's layouts hard-code
GLUON_PAGE_SIZES = (64, 128)  # 128: each page as two 64-token sub-pages (draft_pages_gluon._sub_page)
# the hot-token launch beside the Gluon page programs: (num_warps, num_stages) from GLUON_HOT_MIN_PAIRS (request,
# KV head) pairs a launch (fewer: launch_config's; P = 64 has (4, 1) either way). At P = 128 launch_config's (8, 2)
# made the hot programs hold SM slots the page warps wait for: H100, Llama-3-8B dense drafts at 128k x 2 / 4 / 8
# 133 / 245 / 455 -> 116 / 215 / 414 us, 256k x 8 895 -> 810, 32k x 32 448 -> 420, sparse equal or faster; at batch
# 1 (8 pairs), where a hot program's own time (2 pages of 128 tokens) is on the path, (8, 2) is faster (sparse 8k /
# 32k 12.0 / 13.3 against 13.8 / 14.3 us, dense 128k equal) (bench/results/s28/hot_config)
GLUON_HOT_LAUNCH = (4, 1)
GLUON_HOT_MIN_PAIRS = 9
GLUON_HOT_TOKENS = 64  # ring tokens a hot-token program of the Gluon page launch (draft_decode.GLUON_FUSED_HOT)
# engine="gluon": one-warp page programs an SM for the split rule (254 registers a thread: 8 warps an SM; 6, 10, 12
# and 16 with register caps or without the page prefetch measured equal or slower on an H100, session 21), and the
# merge's channel blocks (4: 128k x 1 77.3 -> 74.3 us; the merge's 32 programs a request were the tail)
GLUON_PROGRAMS_PER_SM = 8
GLUON_MERGE_BLOCKS = 4
GLUON_STRIDED = True  # split s takes pages s, s + NS, ...: its first page id skips the page-count load (H100: sparse
# drafts 0.2-0.7 us faster, 128k x 1 19.0 -> 18.7; dense equal; session 21). split_stride=False: contiguous shares
# engine="gluon" with a 16-bit ring (draft_decode.HOT_NATIVE), fewer than GLUON_HOT_MIN_PAIRS (request, KV head)
# pairs and (sub-)pages a split in GLUON_FUSED_HOT_PAGES[P]: the hot-token programs run in the Gluon page launch,
# RING * P / 64 more warps a pair (sgl_spec/kernels/draft_decode/gluon_hot.py), instead of a Triton launch before it (fused_hot=False):
# the page programs start ~1 us earlier (bench/launch_floor.py). H100, Llama-3-8B batch 1, same runs, fused_hot False
# -> True (bench/results/s29/ab_rule, ab_v2): sparse 7% at 128k (2 pages a split) 16.7 -> 15.8 us at P = 64, 16.5 ->
# 15.8 at P = 128; at P = 128 dense 64k (8 sub-pages) 38.3 -> 37.2, 128k (16) 63.3 -> 62.3. At P = 64 the page loop,
# compiled beside the hot-token code, runs ~4% slower a page (ptxas places its loads elsewhere): dense 64k (8 pages)
# 38.2 -> 38.3-38.6, 128k 63.2 -> 64.7, 256k 113.3 -> 116.7. With 1-page splits the page programs end before a fused
# hot-token program (64 ring tokens on one warp) does: 7% at 64k equal (14.9), at 8k 11.8 -> 12.0
GLUON_FUSED_HOT = True
# engine="gluon" with the shared-memory ring (gluon_stream_stages > 0) and the hot-token programs in their own Triton
# launch: that launch runs after the page launch instead of before it (draft_decode ``hot_last``), so its programs take
# SM slots in the page launch's tail, where SMs have run out of page programs, instead of holding slots that page
# programs wait for at its start. Outputs bit-equal. H200, Llama-3-8B, same process, three interleaved timings,
# medians before -> after (bench/results/s41/hot_last; two more runs of a dev form in s41/hot_last_forms agree):
# P = 64 32k x 8 90.0 -> 87.4 us, 64k x 8 160.9 -> 158.7, 256k x 1 86.0 -> 84.1; P = 128 64k x 8 160.3 -> 154.4,
# 256k x 1 82.3 -> 81.6. At 128k / 256k x 8 and 64k x 32 the change (~3-5 us) is inside the power-capped runs' noise
# (128k x 8 P = 128 297-344 before, 301-324 after; P = 64 305-362 / 307-355). Where the page programs hold a page in
# registers (batch 1 at 64k / 128k) the launch after them sits on the path: 64k x 1 33.1 -> 34.7, 128k x 1 53.1 ->
# 53.9 (s41/hot_last_forms), so the rule keeps it first there. Same-run FA3 grids, off -> on, twice (s41/grid/ab1,
# ab2): dense 64k x 8 3.05 -> 3.10 / 3.11x (P = 64), 3.06 -> 3.16 / 3.15x (P = 128); 128k x 8 P = 128 3.23 / 3.26 ->
# 3.30x
GLUON_HOT_LAST = True
# engine="gluon", P in GLUON_STREAM_PAGE_SIZES and at least GLUON_STREAM_MIN_PAIRS[P] (request, KV head) pairs a launch:
# the page programs stream their pages through a cp.async ring of GLUON_STREAM_STAGES slots in shared memory
# (sgl_spec/kernels/draft_decode/gluon_stream.py; 168 registers, 8960 B a slot) instead of one page prefetched in registers, as many
# programs an SM as its shared memory holds (gluon_programs_per_sm: 12 at 2 slots). H100, Llama-3-8B, same runs,
# registers -> ring (bench/results/s34/stream/diag_b.log): P = 128 64k x 8 218.3 -> 214.3 us, 128k x 8 415.9 ->
# 407.0, 256k x 8 809.4 -> 792.1, 128k x 32 1613 -> 1563; P = 64 equal at batch 8-32 (64k x 8 215.4 -> 216.2, 32k x
# 32 414.7 -> 414.0) and slower at batch 1 (the split count of 12 programs an SM: 128k x 1 at P = 128 62.5 -> 70.5).
# With the rule (s34/rule/rule.log, registers -> rule): 32k x 8 119.6 -> 115.8, 4k x 64 127.2 -> 124.8, 16k x 32
# 221.3 -> 214.1, 8k x 8 43.5 -> 44.0; 64k x 4 (32 pairs, not taken) 116.4 -> 114.4 forced. A stream-only variant of
# the ring (no attention math) ends within 1-3% of the real kernel at batch 8 (64k x 8 P = 64 213.2 us, 92% of copy):
# the page phase is bound by the memory system, not the math
GLUON_STREAM_PAGE_SIZES = (64, 128)
# ... at P = 128 from this many pairs whatever the split; at P = 64 only where a split is long enough (below). H200
# (700 W: the launch is power-capped, bench/NOTES_kernels.md session 37), Llama-3-8B, same runs, registers -> ring,
# means of two interleaved timings (bench/results/s38/ring64): dense P = 64 32k x 8 97.8 -> 92.9 us, 64k x 8 174.5 ->
# 164.1, 128k x 8 323.4 -> 305.7, 256k x 8 636.7 -> 599.4, 16k x 32 174.2 -> 165.7, 64k x 32 645.3 -> 604.7, 256k x 1
# 92.0 -> 88.8, 128k x 4 167.6 -> 159.3; but 8k x 8 (6 sub-pages a split) 36.8 -> 37.4 and 7% drafts with short
# lists slower (64k x 32: 15 sub-pages a split, 63.2 -> 69.5; 128k x 8: 7, 39.5 -> 40.8; only 256k x 8, 13, faster:
# 62.5 -> 60.8), so P = 64 takes the split rule alone
GLUON_STREAM_MIN_PAIRS = {128: 64}
# ... and below 64 pairs where a split holds at least this many 64-token sub-pages with the ring's split count: one
# past GLUON_FUSED_HOT_PAGES[128], so the ring never runs beside the fused hot programs (186 registers, 11 programs
# an SM, fewer than the split count assumes). H100, P = 128, same runs, registers -> ring (bench/results/s35/
# draft_ring_b1): 256k x 1 (21 sub-pages a split) 113.2 -> 108.5 us, 128k x 2 (21) 116.1 -> 114.0, 128k x 4 (42)
# 215.4 -> 209.0, 64k x 4 (21; s34/rule) 117.1 -> 114.4; with fused hot programs slower: 128k x 1 (11) 61.8 ->
# 70.2, 64k x 1 (6) 37.2 -> 43.5 (without them, fused_hot=False, equal: 62.2, 37.7)
GLUON_STREAM_MIN_SPLIT_PAGES = 17
GLUON_STREAM_STAGES = 2
# the ring's copies by TMA (six a page: key and value words, key scale and zero words, value scales and zeros, counted
# on a barrier a slot) instead of every lane's cp.async (sgl_spec/kernels/draft_decode/gluon_stream.py). H200, Llama-3-8B, same runs,
# cp.async -> TMA (bench/results/s39/draft_tma): 64k x 8 P = 64 163.3 -> 157.7 us, 128k x 8 306.6 -> 292.2, 256k x 8
# 605.0 -> 574.6, 128k x 8 P = 128 305.7 -> 290.0, 256k x 1 88.0 -> 83.7, 64k x 32 596.8 -> 576.0; its stream alone
# (no math) 286 -> 283 µs at 128k x 8. Outputs bit-equal (tests/ops/test_draft_tma_gpu.py). Where the tensors cannot
# be addressed as TMA rows (sgl_spec/kernels/common/tma_rows.py) the cp.async ring runs
GLUON_STREAM_TMA = True
GLUON_STREAM_SLOT_BYTES = 8960  # one 64-token (sub-)page: key + value words 8192 B, key scale/zero words 512, value 256
GLUON_SMEM_PER_SM = 232448  # an sm_90 SM's shared memory for blocks (227 KiB), 1 KiB of it reserved a block
GLUON_STREAM_MAX_PROGRAMS = 12  # 168 registers a thread: 12 one-warp programs an SM
GLUON_FUSED_HOT_PAGES = {64: (2, 4), 128: (2, 16)}
GLUON_MIN_CAPABILITY = (9, 0)  # measured on H100 / H200 (sm_90); PDL and the tests assume sm_90+
GLUON_TRITON = ("3.6",)  # Gluon is experimental: its layout API is pinned to the Triton it was written against


def gluon_stream_stages(page_size: int, batch: int, num_kv_heads: int, sub_pages: int, sm_count: int, stages=None,
                        num_splits=None, programs_per_sm=None, min_pages_per_split: int = MIN_PAGES_PER_SPLIT) -> int:
    """Slots of the Gluon page programs' shared-memory ring (0: one page prefetched in registers) for a launch of
    ``batch`` x ``num_kv_heads`` pairs over lists of ``sub_pages`` 64-token sub-pages: ``stages`` where given, else
    GLUON_STREAM_STAGES for the page sizes and launch sizes where it was measured faster: from GLUON_STREAM_MIN_PAIRS
    pairs (at the page sizes it names: P = 128), or from GLUON_STREAM_MIN_SPLIT_PAGES sub-pages a split, with the
    split count of the ring's programs an SM (``num_splits`` / ``programs_per_sm`` where the caller fixes them, as
    draft_decode's keywords)."""
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


def gluon_device_support(device, which: str) -> str:
    """'' where the Gluon kernels (sgl_spec/kernels/draft_decode/gluon_pages.py, sgl_spec/kernels/verify_attention/gluon_pages.py) run on ``device``,
    else why not: a CUDA device of compute capability 9.0+ with the Triton they are written for."""
    import importlib
    import os

    if torch.device(device).type != "cuda" or os.environ.get("TRITON_INTERPRET", "0") == "1":
        return f"the Gluon {which} kernel needs a CUDA device (not the CPU or the Triton interpreter)"
    if torch.cuda.get_device_capability(torch.device(device)) < GLUON_MIN_CAPABILITY:
        return f"the Gluon {which} kernel needs compute capability 9.0 or newer"
    if not triton.__version__.startswith(GLUON_TRITON):
        return f"the Gluon {which} kernel is written for Triton {'/'.join(GLUON_TRITON)}, not {triton.__version__}"
    try:  # importlib: an import statement would make `triton` a local name of this function
        importlib.import_module("triton.experimental.gluon.language.nvidia.ampere")
    except ImportError as e:  # a Triton build without Gluon
        return f"this Triton has no Gluon ({e})"
    return ""


def gluon_hot_last(stages: int, fused: bool, hot_last=None) -> bool:
    """Whether draft_decode's hot-token launch runs after the Gluon page launch (GLUON_HOT_LAST): ``hot_last`` where
    the caller gives it, else where the page programs take the ring (``stages`` > 0); never with the hot-token
    programs in the page launch (``fused``: there is no hot-token launch)."""
    if fused:
        return False
    return bool(GLUON_HOT_LAST and stages > 0 if hot_last is None else hot_last)
