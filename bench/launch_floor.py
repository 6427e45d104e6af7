#!/usr/bin/env python
"""What the kernel benchmark's harness measures for launches that do no work (GPU).

bench_kernels.py times one CUDA-graph replay of a call after a 256 MB read flush (bench/l2_timer.py), median. A
call's time is then its bytes at the streaming rate plus a fixed part (bench/fixed_cost.py fits both from
kernels.json), and part of that fixed part is the harness and the launch structure themselves. This script times
empty kernels launched in the same structure as the batch-1 launches of ``draft_decode`` (hot-token launch releasing
the page launch at once, the page launch waiting for it at its end, the merge launch waiting for both) and of
``verify_attention`` (page launch first, releasing the ring launch, which waits for it at its end, then the merge),
with the same grids and warps (Llama-3-8B, 32 query / 8 KV heads, batch 1, 128k), and one lone launch. Each
program only stores one float, so what is timed is graph start, launches, PDL hand-offs and grid ends.

    python bench/launch_floor.py --out bench/results/sNN/floor     # writes launch_floor.json, one line a case
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

sys.path.insert(0, str(Path(__file__).parent))

# Launch shapes of batch 1, Llama-3-8B (8 KV heads, G = 4), 128k context, H100 (132 SMs), as the launchers pick them:
# draft: hot 8 programs (one a (request, KV head)), 1024 one-warp page programs (128 splits a KV head), merge 32 query
# heads x 4 channel blocks; verify: 256 four-warp page programs (32 splits), 8 ring programs, merge 32 heads x 5 rows.
CASES = {
    "one_launch_1_program": [(1, 1, "")],
    "one_launch_1024_warps": [(1024, 1, "")],
    "draft_b1": [(8, 4, "wait,release"), (1024, 1, "wait_end"), (128, 4, "wait")],
    "draft_b1_no_hot": [(1024, 1, "wait"), (128, 4, "wait")],
    "verify_b1": [(256, 4, "wait,release"), (8, 4, "wait_end"), (160, 4, "wait")],
    "verify_b1_no_ring": [(256, 4, "wait"), (160, 4, "wait")],
}


@triton.jit
def _empty_kernel(x_ptr, WAIT: tl.constexpr, RELEASE: tl.constexpr, WAIT_END: tl.constexpr):
    """One store a program; the PDL hand-offs of the launch it stands for (sgl_spec/kernels/common/pdl.py)."""
    if WAIT:
        gdc_wait()
    if RELEASE:
        gdc_launch_dependents()
    tl.store(x_ptr + tl.program_id(0), tl.program_id(0).to(tl.float32))
    if WAIT_END:
        gdc_wait()


def launches(structure, buf):
    """A call that launches ``structure`` [(programs, warps, PDL flags)] in order, every launch with PDL."""
    def call():
        for programs, warps, flags in structure:
            f = set(flags.split(",")) - {""}
            _empty_kernel[(programs,)](buf, WAIT="wait" in f, RELEASE="release" in f, WAIT_END="wait_end" in f,
                                       num_warps=warps, launch_pdl=True)
    return call


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated, from: " + ",".join(CASES))
    ap.add_argument("--repeats", type=int, default=3, help="timings of each case (interleaved); the median is kept")
    ap.add_argument("--out", required=True, help="output folder (launch_floor.json)")
    a = ap.parse_args(argv)
    a.cases = a.cases.split(",")
    bad = set(a.cases) - set(CASES)
    if bad:
        ap.error(f"unknown --cases {sorted(bad)}; choose from {list(CASES)}")
    return a


def main(argv=None):
    a = parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("launch_floor.py times GPU launches: it needs a CUDA device")
    from kernel_timing import make_timer

    timer = make_timer(SimpleNamespace(device="cuda", l2_flush="read", eager=False, warmup_ms=25, rep_ms=100))
    buf = torch.zeros(4096, dtype=torch.float32, device="cuda")
    times = {c: [] for c in a.cases}
    for _ in range(a.repeats):  # interleaved, so a slow period of the machine touches every case alike
        for c in a.cases:
            times[c].append(timer(launches(CASES[c], buf)) * 1e3)
    rows = []
    for c in a.cases:
        us = statistics.median(times[c])
        rows.append(dict(case=c, us=us, runs_us=times[c], launches=[list(x) for x in CASES[c]]))
        print(f"{c:<24} | {us:6.2f} us (runs {', '.join(f'{t:.2f}' for t in times[c])})", flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                  timing="cuda_graph_replay", timing_flush="read", command=" ".join([sys.executable] + sys.argv),
                  date=time.strftime("%Y-%m-%d"), rows=rows)
    (out / "launch_floor.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
