"""How bench/bench_kernels.py times a call: on the GPU the median of CUDA-graph replays after a cold-L2 flush
(bench/l2_timer.py), eagerly with ``--eager`` or where a call cannot be captured; on the CPU (smoke runs) wall
clock; and the device copy bandwidth that bw_frac divides by, measured in the same run."""
from __future__ import annotations

import statistics
import time
from itertools import cycle

import torch


def make_timer(a):
    if a.device == "cuda":
        from l2_timer import L2Flush, bench_ms

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

    def cpu_timer(fn, reps=2):  # smoke only: wall clock, median of a few calls
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)

    return cpu_timer


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
