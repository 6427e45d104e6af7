"""Launch rules of the Gluon verify page programs (sgl_spec/kernels/verify_attention/gluon_pages.py), from shapes only: the tile the
layouts hard-code and the shapes they cover, when the server's auto engine picks them, and which kernel form (SLIM,
DIRECT scores, row tiles, value-page branches) a launch gets; each rule with the measurements behind it. Split out
of verify_pages_gluon.py (the kernel stays there)."""
from __future__ import annotations

GLUON_PAGE_SIZE, GLUON_HEAD_DIM, GLUON_MAX_ROWS = 64, 128, 32  # the tile the layouts hard-code (rows: NQ * G)
GLUON_PAGE_SIZES = (64, 128)  # 128: each page as two 64-token sub-pages (SUB = 2, _sub_page)
PROGRAMS_PER_SM = 2  # 4 warps at up to 255 registers: 2 programs (8 warps) an SM, for the split rules
NUM_WARPS = 4


def auto_min_pairs(group: int) -> int:
    """--quantspec-verify-kernel auto: Gluon for launches of at least this many (request, KV head) pairs, G query
    heads a KV head. H100, scores on, same runs, with the ring launch after the page launch (RING_ORDER "last").
    Llama-3-8B (G = 4, nq 5): faster from batch 2 at every context measured (bench/results/s25/hot_auto, s25/order2:
    4k x 4 32.1 against 33.8 µs, 128k x 2 208 against 269); at batch 1, with a slot for each ring program
    (verify_splits.splits_for_batch ring_in_grid=None, bench/results/s26/b1), faster from 24k and slower below
    (4k 21.0 against 18.1 µs, 8k 24.6 / 22.7, 16k 30.9 / 30.4, 24k 37.1 / 38.3, 64k 68.7 / 75.9, 128k 116.8 /
    136.1, 256k 210.3 / 254.4), and a launch cannot see its requests' lengths (its CUDA graph serves every length;
    a launch pair that ran each request in the engine of its length, a dev variant since removed, cost 2-5 µs at
    4k-24k: s26/b1, columns "gf="): so every launch, the long contexts this serves being where the time goes.
    pycode-30m (G = 2, nq 13): faster from batch 16 (32 pairs) at 4k and 15k (4k x 16 36.7 against 43.5, 15k x 32
    121 against 152), slower at batch 1-4 up to 32k (s26/g2: 32k x 4 48.0 against 45.8)."""
    return 1 if group >= 4 else 32


def slim_form(group: int) -> bool:
    """The kernel's SLIM form for G query heads a KV head: fewer values live through the page loop (the loop runs at
    the 255-register cap, where every extra one is a spill). H100, same runs against the session-22 kernel
    (bench/results/s23/dev_forms/run3): at G = 4 (Llama-3-8B, nq 5) SLIM is 5.1-5.7% faster with scores at 64k-256k x
    8 and 128k x 1 (128k x 8: 898 against 947 µs) and 0.6-1.9% faster without; at G = 2 (pycode-30m, nq 13) it
    measured 3-5% slower (run1, run2: 15k x 32 165 against 157 µs), so G < 4 keeps the session-22 form (within 0.7%
    of it, run3)."""
    return group >= 4


DIRECT_SCORES = True  # the page programs store the "max" page scores themselves (direct_scores)


def direct_scores(score_lse: bool, page_size: int = GLUON_PAGE_SIZE) -> bool:
    """Whether the page programs store the page scores (score kind "max") from their page maxima in shared memory,
    instead of RAW column maxima [B, Hkv, MAXP, 2G] that score programs of the merge launch reduce over heads (the
    same values as the merge's ``_score_tile``, its G-term sum in another order: equal within fp32 rounding; the
    GPU tests hold both to the reference). Why: the merge's score programs took 8-19 µs after the page programs at
    Llama-3-8B batch 8 (H100, 64k-256k: the merge 13-24 µs with scores, 5 without; bench/results/s25/prof)."""
    return (DIRECT_SCORES or page_size > GLUON_PAGE_SIZE) and not score_lse  # RAW max of sub-pages: not written


def gluon_verify_shapes(page_size: int, half_dim: int, group: int, nq: int) -> str:
    """'' where the Gluon verify page programs cover the shapes (page size, head_dim / 2, G, NQ), else why not."""
    if page_size not in GLUON_PAGE_SIZES or 2 * half_dim != GLUON_HEAD_DIM:
        return (f"the Gluon verify kernel covers page size {' or '.join(map(str, GLUON_PAGE_SIZES))} and head_dim "
                f"{GLUON_HEAD_DIM}, not {page_size} / {2 * half_dim}")
    if not 1 <= nq * group <= GLUON_MAX_ROWS:
        return f"the Gluon verify kernel covers up to {GLUON_MAX_ROWS} rows (γ+1 times G), not {nq} x {group}"
    return ""


def gluon_verify_support(device, page_size: int, head_dim: int, group: int, nq: int) -> str:
    """'' where ``verify_attention(engine="gluon")`` runs for windows of ``nq`` rows, else why not (one line)."""
    from sgl_spec.kernels.draft_decode.launch import gluon_device_support

    return gluon_verify_shapes(page_size, head_dim // 2, group, nq) or gluon_device_support(device, "verify")


def _rows_tile(rows: int) -> int:
    """The MMA's N: rows padded to a power of two, at least 8."""
    return max(8, 1 << (rows - 1).bit_length())


SPLIT_ROWS = True  # 17..24 rows as tiles of 16 + 8 columns (row_tiles); False: one tile of 32
# dev: 25..32 rows as tiles of 16 + 16 columns (row_tiles) instead of one of 32. H100, nq 8 P 64 batch 1 (bench/results/
# s30/split_wide): ~1% faster with the ring launch, 15% slower with the ring program; mixed at batch 8: not a default
SPLIT_ROWS_WIDE = False


def row_tiles(rows: int, group: int) -> tuple[int, int]:
    """(N, N2): the MMA columns of tile A and tile B for ``rows`` = γ+1 times G. Rows are padded to whole n8 MMA
    tiles, but a Gluon tensor's shape is a power of two: 17..24 rows (Llama-3-8B's γ+1 = 5 or 6 at G = 4) go as
    16 + 8 columns instead of 32, a quarter less of the score and P·V MMAs, the softmax and p' (the key and value
    conversions are shared by both tiles). The score rows (columns < 2G) must sit in tile A."""
    n = _rows_tile(rows)
    if SPLIT_ROWS and 16 < rows <= 24 and 2 * group <= 16:
        return 16, 8
    if SPLIT_ROWS_WIDE and 24 < rows <= 32 and 2 * group <= 16:
        return 16, 16
    return n, 0


# (G, N, N2) forms whose value MMAs run page by page behind a branch each (``value_branches``), scores on / off
VALUE_BRANCH_FORMS = {True: ((4, 16, 8), (2, 32, 0)), False: ((4, 16, 8),)}


def value_branches(group: int, n1: int, n2: int, has_scores: bool) -> bool:
    """Whether the page loop skips a group's value MMAs page by page (``_values(BR=True)``: a branch a page, pages
    past the split skipped). Few groups are partial, so little work is saved; the branches change the code ptxas
    emits, faster in some forms and slower in others (H100, same runs, µs, branches / none;
    bench/results/s36/vbr, s36/forms):
    * G = 4, 16 + 8 columns (nq 5): scores on 64k / 128k x 1 P = 64 65.6 / 113.7 against 67.1 / 115.2, P = 128
      62.3 / 108.8 against 64.7 / 110.9, 128k x 8 P = 128 745.1 against 748.7, 128k x 32 P = 64 3002 against 3020;
      scores off within ±0.8 µs at batch 1 and 8;
    * G = 2, 32 columns (pycode-30m, nq 13), scores on: 15k x 32 / x 64 113.8 / 208.4 against 119.6 / 218.8; scores
      off 1-2% slower (15k x 64 202.1 against 198.7): not taken there;
    * G = 4, 32 columns (nq 8): faster at batch 1 (128k x 1 P = 128 114.0 against 116.6), slower at P = 64 from
      batch 8 (128k x 8 810.8 against 796.3, 128k x 32 3218 against 3161): not taken.
    Other forms were not measured and keep the loop without branches."""
    return (group, n1, n2) in VALUE_BRANCH_FORMS[bool(has_scores)]


# The copy-warp form (sgl_spec/kernels/verify_attention/gluon_copy_warp.py): TMA copies from a warp of their own instead of per-thread
# cp.async. H200, same runs (bench/results/s37/ws/): faster in every cell timed (nq 5 at batch 1 10-11%, nq 5 and 8
# at batch 8 0.4-11%); session 38 (H200, bench/results/s38/pps: nq 5 with scores, copy warp / cp.async, µs): 64k x 1
# 49.3 / 55.5, 128k x 1 83.1 / 94.1, 64k x 8 282.4 / 324.6, 128k x 8 578.0 / 649.6; issue 2's grid with it against
# same-run FA3: 1.57-1.78x (s38/grid/verify_nq5). On since session 38, after the GPU suites ran with it on
# (s38/tests: tests/ops/test_verify_copy_warp_gpu.py, and test_verify_gpu.py but its G = 2 long windows: 168
# passed). Not timed on an H100.
COPY_WARP = True
COPY_WARP_GROUPS = (4,)  # G measured: Llama-3-8B; at G = 2 (pycode-30m, nq 13: one 32-column tile) the compute warps'
# 232 registers spill (sm_90 SASS: 152 bytes of stack, 44 spill loads and stores in the loop): not measured


def copy_warp_form(group: int) -> bool:
    """Whether a Gluon verify launch of G query heads a KV head takes the copy-warp form (where the planes and scales
    allow it: verify_pages_ws_gluon.copy_warp_supported)."""
    return COPY_WARP and group in COPY_WARP_GROUPS


# The page loop's running sums l and z per lane, reduced over lanes and warps once after the loop (``_probs`` LANE),
# instead of over each warp's lanes every group (36 shuffles and as many adds a group at 16 + 8 columns: the copy-warp
# loop 1921 -> 1850 sm_90 instructions, the epilogue the same size). H200, same process (bench/results/s42/): back to
# back under the power cap 128k x 8 P = 64 669.8 -> 659.1 µs and 678.0, 677.9 -> 664.4, 665.3 (another machine),
# 128k x 1 89.6 -> 88.5; flushed single calls 64k x 8 300.9-303.1 -> 290.2-298.9, 128k x 8 P = 128 608.1-609.6 ->
# 595.8-608.2, 256k x 1 153.2-154.4 -> 152.1-152.4, 64k x 1 and 128k x 1 within 0.3 µs. Outputs within fp32
# rounding of the per-warp sums, page scores bit-equal (tests/ops/test_verify_lane_sums_gpu.py).
LANE_SUMS = True


def lane_sums() -> bool:
    """Whether the Gluon verify page loop keeps its running sums per lane (``LANE_SUMS``)."""
    return LANE_SUMS
