"""Launch rules of the Gluon verify page programs (``gluon_pages.py``, ``gluon_copy_warp.py``), from shapes only: the
tile the layouts hard-code and the shapes it covers, when the server's auto engine takes it, and which kernel form a
launch gets (row tiles, SLIM, value-page branches, copy warp, page scores stored by the page programs). The
measurements behind each rule: docs/KERNELS.md, "verify_attention"."""
from __future__ import annotations

from sgl_spec.kernels.engine import GLUON_PAGE_SIZES, gluon_device_support  # 128: two 64-token sub-pages (SUB = 2)

GLUON_PAGE_SIZE, GLUON_HEAD_DIM, GLUON_MAX_ROWS = 64, 128, 32  # the tile the layouts hard-code (rows: NQ * G)
PROGRAMS_PER_SM = 2  # 4 warps at up to 255 registers: 2 programs (8 warps) an SM, for the split rules
NUM_WARPS = 4
COPY_WARP_GROUPS = (4,)  # G whose launches take the copy-warp form (copy_warp_form)
# (G, N, N2) forms whose value MMAs run page by page behind a branch each (value_branches), scores on / off
VALUE_BRANCH_FORMS = {True: ((4, 16, 8), (2, 32, 0)), False: ((4, 16, 8),)}


def auto_min_pairs(group: int) -> int:
    """--quantspec-verify-kernel auto: Gluon for launches of at least this many (request, KV head) pairs, G query
    heads a KV head. G >= 4: every launch (faster from batch 2 at every context, and at batch 1 from 24k, where the
    time goes; a launch's CUDA graph serves every length, so it cannot pick by length). G < 4: from 32 pairs (slower
    at batch 1-4 up to 32k, faster from batch 16)."""
    return 1 if group >= 4 else 32


def slim_form(group: int) -> bool:
    """The kernel's SLIM form for G query heads a KV head: the rows' own pages recomputed where used, so fewer values
    live through the page loop (it runs at the 255-register cap, where every extra one is a spill). Faster at
    G = 4, slower at G = 2."""
    return group >= 4


def direct_scores(score_lse: bool) -> bool:
    """Whether the page programs store the page scores themselves (score kind "max"), from their page maxima in
    shared memory, instead of RAW values [B, Hkv, MAXP, 2G] that score programs of the merge launch reduce over heads
    (kind "lse": the page log-sum-exps). The same values as the merge's ``_score_tile`` (its G-term sum in another
    order: equal within fp32 rounding); it saves the merge's score programs, which ran after the page programs."""
    return not score_lse


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
    return gluon_verify_shapes(page_size, head_dim // 2, group, nq) or gluon_device_support(device, "verify")


def _rows_tile(rows: int) -> int:
    """The MMA's N: rows padded to a power of two, at least 8."""
    return max(8, 1 << (rows - 1).bit_length())


def row_tiles(rows: int, group: int) -> tuple[int, int]:
    """(N, N2): the MMA columns of tile A and tile B for ``rows`` = γ+1 times G. Rows are padded to whole n8 MMA
    tiles, but a Gluon tensor's shape is a power of two: 17..24 rows (γ+1 = 5 or 6 at G = 4) go as 16 + 8 columns
    instead of 32, a quarter less of the score and P·V MMAs, the softmax and p' (the key and value conversions are
    shared by both tiles). The score rows (columns < 2G) must sit in tile A."""
    if 16 < rows <= 24 and 2 * group <= 16:
        return 16, 8
    return _rows_tile(rows), 0


def value_branches(group: int, n1: int, n2: int, has_scores: bool) -> bool:
    """Whether the page loop skips a group's value MMAs page by page (``_values(BR=True)``: a branch a page, pages
    past the split skipped). Few groups are partial, so little work is saved; the branches change the code ptxas
    emits, faster in some forms and slower in others, so only the forms in VALUE_BRANCH_FORMS take them: G = 4 at
    16 + 8 columns (γ+1 = 5) with or without scores, G = 2 at 32 columns (γ+1 = 13) with scores."""
    return (group, n1, n2) in VALUE_BRANCH_FORMS[bool(has_scores)]


def copy_warp_form(group: int) -> bool:
    """Whether a Gluon verify launch of G query heads a KV head takes the copy-warp form (``gluon_copy_warp.py``,
    where the planes and scales allow it: ``copy_warp_supported``): G = 4. At G = 2 (one 32-column tile) the
    compute warps' 232 registers would spill."""
    return group in COPY_WARP_GROUPS
