"""Median GPU time of one call that starts with a cold L2, the L2 made cold one of two ways (``--l2-flush``).

``zero`` is ``triton.testing.do_bench``'s own flush: it zeroes a 256 MB buffer before every timed call. That leaves
the L2 (50 MB on an H100) full of **dirty** lines of the buffer, and the timed call pays their write-back to DRAM as
its own reads evict them: ~50 MB of writes, ~15 µs at copy speed, charged to every call however short. A decode
step never starts its attention that way: before it come the QKV projection's weight reads (~50 MB for a Llama-3-8B
layer) and a few KB of writes, so the L2 holds clean lines.

``read`` flushes by reading a 256 MB buffer (one max reduction into a preallocated scalar): the L2 ends up as cold
for the timed call's data (none of it is cached) but clean, as in a decode step. It is the default of
bench_kernels.py and dev_kernels.py from session 23; both modes are recorded in the results (``timing_flush``).

Otherwise this is do_bench's procedure: a five-call estimate, warm-up calls for ``warmup_ms``, then one flush and
one timed call (CUDA events around it) per repetition for ``rep_ms``; the median is returned.
"""
from __future__ import annotations

import statistics

import torch

FLUSH_MODES = ("read", "zero")
FLUSH_BYTES = 256 << 20


class L2Flush:
    """One 256 MB buffer and the call that makes the L2 cold before a timed call."""

    def __init__(self, mode: str, device="cuda"):
        if mode not in FLUSH_MODES:
            raise ValueError(f"L2 flush mode {mode!r}: use one of {', '.join(FLUSH_MODES)}")
        self.mode = mode
        self.buf = torch.ones(FLUSH_BYTES // 4, dtype=torch.int32, device=device)
        self.out = torch.empty((), dtype=torch.int32, device=device)

    def __call__(self):
        if self.mode == "zero":
            self.buf.zero_()
        else:
            torch.amax(self.buf, dim=0, out=self.out)


def bench_ms(fn, flush: L2Flush, warmup_ms: float = 25, rep_ms: float = 100) -> float:
    """Median ms of ``fn()`` with ``flush()`` before each timed call (do_bench's procedure, see the module doc)."""
    fn()
    torch.cuda.synchronize()
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0.record()
    for _ in range(5):
        flush()
        fn()
    t1.record()
    torch.cuda.synchronize()
    est = max(t0.elapsed_time(t1) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / est))):
        fn()
    n = max(1, int(rep_ms / est))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        flush()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))
