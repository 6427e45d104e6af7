"""How bench/bench_kernels.py times a call: on the GPU the median of CUDA-graph replays after a cold-L2 flush,
eagerly with ``--eager`` or where a call cannot be captured; on the CPU (smoke runs) wall clock; and the device copy
bandwidth that bw_frac divides by, measured in the same run.

The L2 is made cold one of two ways (``--l2-flush``). ``zero`` is ``triton.testing.do_bench``'s own flush: it zeroes
a 256 MB buffer before every timed call, which leaves the L2 full of dirty lines whose write-back the timed call then
pays (~50 MB of writes, charged to every call however short). A decode step never starts its attention that way:
before it come the QKV projection's weight reads, so the L2 holds clean lines. ``read`` (the default) flushes by
reading a 256 MB buffer: the L2 is as cold for the timed call's data but clean, as in a decode step. Otherwise this
is do_bench's procedure: a five-call estimate, warm-up calls for ``warmup_ms``, then one flush and one timed call
(CUDA events around it) per repetition for ``rep_ms``; the median is returned."""
from __future__ import annotations

import statistics
import time
from itertools import cycle

import torch


def make_timer(a):
    if a.device == "cuda":
        flush = L2Flush(a.l2_flush)

        def eager(fn):
            return bench_ms(fn, flush, a.warmup_ms, a.rep_ms)

        if a.eager:
            return eager

        def graphed(fn):
            """Median time of CUDA-graph replays of ``fn`` (as SGLang runs decode): host launch overhead (Python
            argument checks, several launches) stays out of the number for every kernel and baseline alike. ``fn``
            may rotate between input copies: one graph is captured per call, the replays rotate the same way."""
            try:
                for _ in range(2):
                    fn()  # JIT compile / workspace allocation outside the capture
                torch.cuda.synchronize()
                graphs = []
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(2):
                        g = torch.cuda.CUDAGraph()
                        with torch.cuda.graph(g, stream=s):
                            fn()
                        graphs.append(g)
                torch.cuda.current_stream().wait_stream(s)
                torch.cuda.synchronize()
            except Exception as e:  # not capturable: time it eagerly and say so
                print(f"[timer] CUDA graph capture failed ({type(e).__name__}: {str(e)[:120]}): eager timing")
                torch.cuda.synchronize()
                return eager(fn)
            return eager(rotate([g.replay for g in graphs]))

        return graphed

    return wall_ms


def wall_ms(fn, reps=2) -> float:
    """CPU smoke runs: wall clock, median of a few calls after one warm-up call."""
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def rotate(fns):
    """One callable that runs the given ones in turn (inputs alternate between disjoint copies)."""
    it = cycle(fns)
    return lambda: next(it)()


def copy_gbps(a, timer):
    n = (1 << 30) if a.device == "cuda" else (64 << 20)
    src = torch.empty(n, dtype=torch.uint8, device=a.device).random_(0, 256)
    dst = torch.empty_like(src)
    if a.device == "cuda":  # one large kernel: timed eagerly (a graph replay of this copy measured ~20% slower)
        import triton.testing

        ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=a.warmup_ms, rep=a.rep_ms, return_mode="median")
    else:
        ms = timer(lambda: dst.copy_(src))
    return 2 * n / ms / 1e6


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
