"""Work stealing for the Gluon draft page programs' TMA ring (kernels/draft_pages_gluon.py ``STEAL``).

With a static share of the list per split, a launch ends when its slowest program does. On an H200 (session 40,
``.work/draft_timeline.py``: every program's %globaltimer start and end) the programs of one (request, KV head) pair
streaming the same number of pages took 120-176 µs at 128k x 8 (P = 64); the last SMs finished ~10% of the launch
after the median one. So the pages go out in chunks of ``STEAL`` 64-token sub-pages: split s takes chunk s, then
chunks NUM_SPLITS + k in the order its pair's counter hands out k. Each grab is issued a chunk ahead of its use and
read only when the program reaches the chunk's end, so its latency hides behind the chunk's pages. The counters
(``ctr_ptr``: [2, pairs] int32, grab counts then finished programs) start at zero and the last program of a pair
puts both back to zero: a buffer kept across launches needs no clearing.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

LANES = gl.constexpr(gl.BlockedLayout(size_per_thread=[1], threads_per_warp=[32], warps_per_cta=[1], order=[0]))


@gluon.jit
def _grab(cp):
    """One atomic increment of the pair's counter by lane 0 -> the previous count in lane 0 (a [32] tensor, read
    with ``_lane0`` where it is needed: the load's latency is not waited for here)."""
    lane = gl.arange(0, 32, layout=LANES)
    return gl.atomic_add(cp + lane * 0, gl.full([32], 1, gl.int32, LANES), mask=lane == 0, sem="relaxed")


@gluon.jit
def _lane0(x):
    lane = gl.arange(0, 32, layout=LANES)
    return gl.sum(gl.where(lane == 0, x, 0), 0)


@gluon.jit
def _advance(ia, ea, ca, cp, STEAL: gl.constexpr, NUM_SPLITS: gl.constexpr):
    """The next list position after ``ia`` in its chunk [.., ea), or the first of the grabbed chunk ``ca`` (then
    the next one is grabbed)."""
    ia = ia + 1
    if ia == ea:
        ia = (NUM_SPLITS + _lane0(ca)) * STEAL
        ea = ia + STEAL
        ca = _grab(cp)
    return ia, ea, ca


@gluon.jit
def _steal_done(cp, dp, NUM_SPLITS: gl.constexpr):
    """This program's grabs are over: count it finished; the pair's last program resets both counters."""
    lane = gl.arange(0, 32, layout=LANES)
    d = gl.atomic_add(dp + lane * 0, gl.full([32], 1, gl.int32, LANES), mask=lane == 0, sem="acq_rel")
    last = (lane == 0) & (_lane0(d) == NUM_SPLITS - 1)
    zero = gl.zeros([32], gl.int32, LANES)
    gl.atomic_xchg(cp + lane * 0, zero, mask=last, sem="relaxed")
    gl.atomic_xchg(dp + lane * 0, zero, mask=last, sem="relaxed")
