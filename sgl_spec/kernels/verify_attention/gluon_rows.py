"""The window's rows as the MMA columns of the Gluon verify page programs (``gluon_pages.py``): which window row and
query head a column holds (score rows first, the Triton kernel's order), q^T tiles, the causal masks of a split's
last group, the softmax step's p' and running sums of one column tile, and the stores of partials, RAW page values
and page scores (one tile's column-side work; the page side and the loop are in ``gluon_pages.py``)."""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from sgl_spec.kernels.draft_decode.gluon_pages import _key_channel
from sgl_spec.kernels.verify_attention.gluon_frags import COLS, ROWS, _mx_layout, _per_lane, _value_row_channel


@gluon.jit
def _window_row(slot, NQ, ra, rb, n_front, lo_r, hi_r):
    """(window row, valid) of each slot: slots 0 and 1 hold the score rows ra, rb (one slot when they are the same
    row), the others the remaining rows in order (the Triton kernel's row order, so the merge and RAW agree)."""
    ok = slot < NQ
    k = slot - n_front
    k = k + (k >= lo_r).to(gl.int32)
    k = k + ((k >= hi_r) & (hi_r != lo_r)).to(gl.int32)
    i = gl.where(slot == 0, ra, gl.where((slot == 1) & (n_front == 2), rb, k))
    return gl.where(ok, i, 0), ok


@gluon.jit
def _q_tile(q_ptr, s_qb, s_qn, s_qh, b, h, n0, NT: gl.constexpr, NQ, ra, rb, n_front, lo_r, hi_r, G: gl.constexpr):
    """q^T [128, NT] of columns n0 .. n0 + NT - 1 (fp16, channels in the keys' order; rows past the window: 0)."""
    QL: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 1], threads_per_warp=[32, 1], warps_per_cta=[1, 4],
                                        order=[0, 1])
    qk_i = gl.arange(0, 128, layout=gl.SliceLayout(1, QL))
    qn = n0 + gl.arange(0, NT, layout=gl.SliceLayout(0, QL))
    q_i, q_ok = _window_row(qn // G, NQ, ra, rb, n_front, lo_r, hi_r)
    q_at = (q_ptr + b * s_qb + q_i.to(gl.int64)[None, :] * s_qn + (h * G + qn % G).to(gl.int64)[None, :] * s_qh
            + _key_channel(qk_i)[:, None])
    return gl.load(q_at, mask=q_ok[None, :], other=0.0).to(gl.float16)


@gluon.jit
def _own_pages(n_c, q_start, NQ, ra, rb, n_front, lo_r, hi_r, G: gl.constexpr, SUB: gl.constexpr = 1):
    """Each column's own page (the page of its window row) for the columns n_c [NT] (COLS), as the index of its
    first 64-token sub-page (SUB = P / 64): a row sees the INT8 pages before its own page whole."""
    i_c, _ok = _window_row(n_c // G, NQ, ra, rb, n_front, lo_r, hi_r)
    return (q_start + i_c) // (64 * SUB) * SUB


@gluon.jit
def _row_pages(q_start, NQ, ra, rb, n_front, lo_r, hi_r, G: gl.constexpr, N: gl.constexpr, N2: gl.constexpr,
               SLIM: gl.constexpr, SUB: gl.constexpr):
    """Rows (MMA columns): n = slot * G + g; slots ra, rb first (the Triton kernel's order). Columns 0..N-1 are tile
    A, N..N+N2-1 tile B (``row_tiles``: 20 rows as 16 + 8 instead of 32) -> (tile A's columns, each column's own
    page for tile A and tile B). SLIM: the own pages are computed in the loop's masking branch instead of kept live
    through it (the loop runs at the 255-register cap; ``slim_form`` says for which G)."""
    n_c = gl.arange(0, N, layout=COLS)
    if SLIM:
        own_a = q_start  # unused: the masking branch computes the rows' own pages
        own_b = q_start
    else:
        own_a = _own_pages(n_c, q_start, NQ, ra, rb, n_front, lo_r, hi_r, G, SUB)
        if N2 > 0:
            own_b = _own_pages(N + gl.arange(0, N2, layout=COLS), q_start, NQ, ra, rb, n_front, lo_r, hi_r, G, SUB)
        else:
            own_b = own_a  # never read (one tile)
    return n_c, own_a, own_b


@gluon.jit
def _mask(sc, r_j, j1, n_scored, own, n_c, q_start, NQ, ra, rb, n_front, lo_r, hi_r, G: gl.constexpr,
          SLIM: gl.constexpr, SUB: gl.constexpr = 1):
    """Scores of pages past the split or past a column's own page (causal among the window's pages) -> -inf.
    SLIM: the columns' own pages computed here (rare: only a split's last group) instead of kept live."""
    if SLIM:
        own = _own_pages(n_c, q_start, NQ, ra, rb, n_front, lo_r, hi_r, G, SUB)
    vis = (r_j[:, None] < j1) & ((r_j[:, None] < n_scored) | (r_j[:, None] < own[None, :]))
    return gl.where(vis, sc, float("-inf"))


@gluon.jit
def _page_max(sc):
    """S^T [256, NT] (MMA rows R = 64 r + 16 w + i) -> each page's max of every column [4 w, NT] (intra-warp)."""
    return gl.max(gl.max(gl.reshape(sc, [4, 4, 16, sc.shape[1]]), 0), 1)


@gluon.jit
def _group_max(sc, m_run, mx, qk_scale):
    """After the page-maxima barrier: one tile's running max over the group's four page maxima in ``mx``, the
    rescale factor of its running sums and p = 2^(s - m) (qk_scale: raw q·k to log2 units)."""
    m_new = gl.maximum(m_run, gl.convert_layout(gl.max(mx.load(_mx_layout(sc.shape[1])), 0), COLS))
    alpha = gl.exp2((m_run - m_new) * qk_scale)
    p = gl.exp2(sc * qk_scale - (m_new * qk_scale)[None, :])
    return m_new, alpha, p


@gluon.jit
def _probs(p, alpha, vs, vz, psm, l_w, z_w):
    """p' = p s_v (fp16) into shared memory (page * 64 + token rows) and the running row sums l and
    Σ p (z_v + 7.53125 s_v), rescaled by alpha, per lane [4 w, 8 g, N] (``_per_lane``: each lane's own rows only,
    reduced over lanes and warps once in ``_store_partial``, not every group)."""
    NT: gl.constexpr = p.shape[1]
    vsf = vs.to(gl.float32)
    vzf = (vz.to(gl.float32) + 7.53125 * vsf)[:, None]
    a4 = gl.convert_layout(alpha, gl.SliceLayout(0, gl.SliceLayout(1, l_w.type.layout)))[None, None, :]
    l_w = l_w * a4 + _per_lane(p)
    z_w = z_w * a4 + _per_lane(p * vzf)
    p16 = (p * vsf[:, None]).to(gl.float16)
    psm.store(gl.reshape(gl.permute(gl.reshape(p16, [4, 4, 16, NT]), [1, 0, 2, 3]), [256, NT]))
    return l_w, z_w


@gluon.jit
def _col_total(x):
    """``_probs``' per-lane running sums -> one sum a column [N] (COLS): the lanes first (shuffles), then the warps
    (through shared memory: a quarter of the data)."""
    return gl.convert_layout(gl.sum(gl.sum(x, 1), 0), COLS)


@gluon.jit
def _store_partial(acc, m_run, l_w, z_w, n_c, m_ptr, l_ptr, acc_ptr, b, h, s, qk_scale, NQ, HQ, S1, ra, rb,
                   n_front, lo_r, hi_r, G: gl.constexpr):
    """One tile's partial (m, l, unnormalized acc) of the columns n_c at partial index 1 + split."""
    l_r = _col_total(l_w)
    z_r = _col_total(z_w)
    o = acc * 0.0625 + z_r[None, :]
    i_c, row_ok = _window_row(n_c // G, NQ, ra, rb, n_front, lo_r, hi_r)
    hq = h * G + n_c % G
    prow = ((b * NQ + i_c.to(gl.int64)) * HQ + hq.to(gl.int64)) * S1 + 1 + s
    oR = gl.arange(0, 128, layout=ROWS)
    gl.store(acc_ptr + prow[None, :] * 128 + _value_row_channel(oR)[:, None], o, mask=row_ok[None, :])
    gl.store(m_ptr + prow, m_run * qk_scale, mask=row_ok)
    gl.store(l_ptr + prow, l_r, mask=row_ok)


@gluon.jit
def _store_raw(raw_ptr, s_rb, s_rh, b, h, jb, val, lim, n_front, G: gl.constexpr, N: gl.constexpr):
    """Score-row values [W, N] of the group's pages jb + w (< lim) into RAW [B, Hkv, MAXP, 2G] (row n < n_front G;
    W = 4 pages, or 2 where a page is two sub-pages). Only the first K = max(8, 2G) columns can be score rows: the
    others are cut off in registers first (fewer predicated stores and addresses live in the loop)."""
    K: gl.constexpr = _score_cols(G, N)
    W: gl.constexpr = val.shape[0]
    for _ in gl.static_range(_log2(N // K)):
        half, _unused = gl.split(gl.permute(gl.reshape(val, [W, 2, val.shape[1] // 2]), [0, 2, 1]))
        val = half
    L: gl.constexpr = val.type.layout
    w = gl.arange(0, W, layout=gl.SliceLayout(1, L))
    n = gl.arange(0, K, layout=gl.SliceLayout(0, L))
    at = raw_ptr + b * s_rb + h * s_rh + (jb + w).to(gl.int64)[:, None] * (2 * G) + n[None, :]
    gl.store(at, val, mask=((jb + w) < lim)[:, None] & (n < n_front * G)[None, :])


@gluon.jit
def _store_scores_mx(sc_ptr, s_cb, s_ch, s_cj, jb, mx, n_scored, j1, n_front, sm_scale, G: gl.constexpr,
                     N: gl.constexpr, SUB: gl.constexpr = 1):
    """The page scores of the group's pages jb + w (< n_scored, < j1) from the page maxima in ``mx`` [4 w, N]:
    sm_scale * sum over the G heads of the max over the score rows (columns g and G + g; one row when n_front = 1),
    as the merge's ``_score_tile`` computes them from RAW (the G-term sum in another order: equal within fp32
    rounding). One [4, 2G] load, then registers only: per-column loads hoisted their addresses out of the page loop
    and spilled. Nothing loop-invariant is derived here (program ids read again, ``_ctaid``; page bounds compared
    separately; a constexpr column bound), so no extra value stays live through the loop at the 255-register cap."""
    K: gl.constexpr = _score_cols(G, N)
    L: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 1], threads_per_warp=[32 // K, K], warps_per_cta=[4, 1],
                                       order=[1, 0])
    if 2 * G <= N:
        col = gl.arange(0, 2 * G, layout=gl.SliceLayout(0, L))
        v = gl.where(((col < G) | (n_front == 2))[None, :], mx.slice(0, 2 * G, dim=1).load(L), float("-inf"))
        a = gl.max(gl.reshape(v, [4, 2, G]), 1)
    else:  # N < 2G: a window of one row (n_front = 1)
        a = mx.slice(0, G, dim=1).load(L)
    if SUB > 1:  # a page's sub-pages (pairs of warps): the max over the whole page
        a = gl.max(gl.reshape(a, [4 // SUB, SUB, a.shape[1]]), 1)
    val = gl.sum(a, 1) * sm_scale
    w = gl.arange(0, 4 // SUB, layout=val.type.layout)
    at = (sc_ptr + _ctaid("z").to(gl.int64) * s_cb + _ctaid("y").to(gl.int64) * s_ch
          + (jb // SUB + w).to(gl.int64) * s_cj)
    j = jb + SUB * w  # the page's first sub-page (groups and splits start at whole pages)
    gl.store(at, val.to(sc_ptr.dtype.element_ty), mask=(j < n_scored) & (j < j1))


@gluon.jit
def _ctaid(axis: gl.constexpr):
    """The program id along ``axis``, read again where it is used: a volatile read is not hoisted out of the page
    loop, so nothing derived from it stays live (spilled) across the loop."""
    return gl.inline_asm_elementwise("mov.u32 $0, %ctaid." + axis + ";", "=r", [], dtype=gl.int32, is_pure=False,
                                     pack=1)


@gluon.constexpr_function
def _score_cols(G, N):
    return min(N, max(8, 1 << (2 * G - 1).bit_length()))


@gluon.constexpr_function
def _log2(x):
    return x.bit_length() - 1
