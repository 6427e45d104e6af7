"""Timing helpers shared by the kernel development benches (bench/dev_kernels.py, bench/dev_verify.py): CUDA-graph
replays timed by bench/l2_timer.py (median, cold L2 as --l2-flush says), the device's copy bandwidth, and the
--alias page-table folding."""
from __future__ import annotations

import sys
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).parent))
from l2_timer import L2Flush, bench_ms  # noqa: E402

_TIMING = {}  # "flush": the L2Flush of --l2-flush, "gluon_dir": --gluon-dir, "alias": --alias (set once by main)


def alias_pages(ids: torch.Tensor) -> torch.Tensor:
    """With --alias N: column j of a page table / page list reads column j % N's page, so a launch moves N pages a
    (request, KV head) from HBM and the rest from L2. The kernel's instructions are unchanged: the time is then its
    compute (and L2) bound, the floor a better overlap of loads and math could reach."""
    n = _TIMING.get("alias", 0)
    if not n or ids.shape[-1] <= n:
        return ids
    cols = torch.arange(ids.shape[-1], device=ids.device) % n
    return ids[..., cols].contiguous()


def _bench(fn):
    if "flush" not in _TIMING:
        _TIMING["flush"] = L2Flush("read")
    return bench_ms(fn, _TIMING["flush"], warmup_ms=20, rep_ms=80)


def capture_graph(fn):
    """A CUDA graph of one call of ``fn``: called once to compile (outside the capture), once on a side stream (warm
    allocations), then captured."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def timer(fn, graph=True):
    return _bench(capture_graph(fn).replay if graph else fn)


def copy_gbps():
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 256)
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=20, rep=80, return_mode="median")
    return 2 * n / ms / 1e6


def time_variant(fn, label, parts, log, what="variant"):
    """``timer(fn)`` in ms, or None where the variant does not compile or fit: then reported (in ``parts`` and the
    log), not fatal, so the other variants of the call still run."""
    try:
        return timer(fn)
    except Exception as e:
        parts.append(f"{label}: {type(e).__name__}")
        log(f"  {what} {label}: {type(e).__name__}: {str(e)[:300]}")
        return None
