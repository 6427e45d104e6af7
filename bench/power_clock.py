#!/usr/bin/env python
"""SM clock and board power while one kernel call replays back to back (GPU).

Why (bench/NOTES_kernels.md, session 37): on an H200 (700 W limit) the Gluon verify and the dense draft draw the power
limit and the GPU lowers their SM clock (1650-1725 MHz instead of 1980); FA3 is capped too but is bound by memory, so
ratios against it move with the clock, not only with bytes. bench_kernels.py times short bursts after an L2 flush and
cannot show this; here each kernel (a CUDA graph of one call, Llama-3-8B layer shapes) replays back to back for
``--seconds`` while ``nvidia-smi`` samples the SM clock, power draw and clock-event reasons every 100 ms, and one line
a kernel reports µs a replay and those samples over its window (the first 0.5 s and the last 0.2 s left out).

    python bench/power_clock.py --ctx 131072 --batch 8 --page 64 --kernels verify,draft,fa3,copy --out DIR

Kernels: ``verify`` (Gluon page programs, γ+1 = 5 rows, scores on, the server's partition), ``verify_zero`` (the
same on all-zero planes and scales: the instruction stream without data-dependent power), ``draft`` (dense, Gluon),
``fa3`` (sgl_kernel FA3, 5 rows, BF16 pages; skipped with a note where it does not load), ``copy`` (1 GiB
device copy). Data are random, as in bench_kernels.py.
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

SMI_FIELDS = "timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
KERNELS = ("verify", "verify_zero", "draft", "fa3", "copy")
TRIM_HEAD_S, TRIM_TAIL_S = 0.5, 0.2  # the window's edges: the clock settles after a change of kernel


def parse_smi(text: str) -> list[dict]:
    """nvidia-smi --format=csv rows (SMI_FIELDS, header first) -> samples {t (epoch s, this machine's local time),
    sm_mhz, mem_mhz, watts, temp_c, reasons}; rows that do not parse (a header, a cut line) are skipped."""
    out = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) < 6:
            continue
        try:
            t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append(dict(t=t, sm_mhz=float(f[1].split()[0]), mem_mhz=float(f[2].split()[0]),
                            watts=float(f[3].split()[0]), temp_c=float(f[4]), reasons=f[5]))
        except ValueError:
            continue
    return out


def summarize(samples: list[dict], t0: float, t1: float) -> dict:
    """The samples inside [t0 + TRIM_HEAD_S, t1 - TRIM_TAIL_S]: count, SM clock median / min, power median / max, the
    clock-event reason masks seen (0x4: SW power cap)."""
    w = [s for s in samples if t0 + TRIM_HEAD_S < s["t"] < t1 - TRIM_TAIL_S]
    if not w:
        return dict(samples=0)
    clk = [s["sm_mhz"] for s in w]
    pw = [s["watts"] for s in w]
    return dict(samples=len(w), sm_mhz_median=statistics.median(clk), sm_mhz_min=min(clk),
                watts_median=statistics.median(pw), watts_max=max(pw), temp_c_max=max(s["temp_c"] for s in w),
                reasons=sorted({s["reasons"] for s in w}))


def _replay(g, seconds: float):
    """Back-to-back replays for ``seconds`` (50 a host sync) -> (wall t0, wall t1, µs a replay by CUDA events)."""
    import torch

    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0, n = time.time(), 0
    e0.record()
    while time.time() - t0 < seconds:
        for _ in range(50):
            g.replay()
        n += 50
        torch.cuda.synchronize()
    e1.record()
    torch.cuda.synchronize()
    return t0, time.time(), e0.elapsed_time(e1) * 1e3 / n


def build(kernel: str, ctx: int, batch: int, page: int, nq: int = 5):
    """A zero-argument call of ``kernel`` on fresh random inputs, or a string saying why it does not run."""
    import torch

    import kernel_cases as kc

    gen = torch.Generator().manual_seed(0)
    if kernel == "copy":
        src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(0, 256)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)
    if kernel == "fa3":
        from kernel_baselines import fa3_attention, load_fa3

        fa3, why = load_fa3()
        if fa3 is None:
            return why
        cache = kc.bf16_pages([ctx] * batch, page, "cuda", gen=gen)[0]
        q = torch.randn(batch, nq, kc.HQ, kc.D, device="cuda", dtype=kc.DTYPE)
        run = fa3_attention(fa3, cache, nq)
        return lambda: run(q)
    qb = kc.quant_pages([ctx] * batch, page, "cuda", gen=gen)[0]
    if kernel == "draft":
        from sgl_spec.kernels.draft_decode.triton import draft_decode

        ids, cnt, hs, hl = kc.draft_args(qb, gen=gen)
        q = torch.randn(batch, kc.HQ, kc.D, device="cuda", dtype=kc.DTYPE)
        out = torch.empty_like(q)
        return lambda: draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, kc.SM_SCALE,
                                    out=out, engine="gluon")
    from sgl_spec.kernels.verify_attention.triton import verify_attention

    if kernel == "verify_zero":
        st = qb.store
        for t in (st.k_upper, st.k_lower, st.v_upper, st.v_lower, st.k_scale, st.k_zero, st.v_scale, st.v_zero):
            t.zero_()
    q = torch.randn(batch, nq, kc.HQ, kc.D, device="cuda", dtype=kc.DTYPE)
    out = torch.empty_like(q)
    sc = torch.zeros(batch, kc.HKV, qb.page_table.shape[1], device="cuda")
    qs = kc.verify_q_start(qb, nq)
    return lambda: verify_attention(q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, kc.SM_SCALE,
                                    scores=sc, out=out, batch_invariant=False, engine="gluon")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctx", type=int, default=131072)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--page", type=int, default=64)
    ap.add_argument("--kernels", default="verify,draft,fa3,copy", help=",".join(KERNELS))
    ap.add_argument("--seconds", type=float, default=4.0, help="back-to-back replays a kernel")
    ap.add_argument("--out", default="/tmp/power_clock")
    a = ap.parse_args()
    kernels = [k for k in a.kernels.split(",") if k]
    bad = set(kernels) - set(KERNELS)
    if bad:
        ap.error(f"unknown --kernels {sorted(bad)}; choose from {list(KERNELS)}")
    import torch
    import triton
    from dev_timing import capture_graph

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    smi_path = out / "smi.csv"
    with open(smi_path, "w") as f:
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv", "-lms", "100"], stdout=f,
                               stderr=subprocess.STDOUT)
    rows = []
    try:
        for k in kernels:
            fn = build(k, a.ctx, a.batch, a.page)
            if isinstance(fn, str):
                print(f"{k}: skipped ({fn})", flush=True)
                continue
            g = capture_graph(fn)
            time.sleep(1.0)  # the clock recovers between kernels
            t0, t1, us = _replay(g, a.seconds)
            rows.append(dict(kernel=k, ctx=a.ctx, batch=a.batch, page=a.page, us=us, t0=t0, t1=t1))
            del g, fn
            torch.cuda.empty_cache()
    finally:
        time.sleep(0.3)
        smi.terminate()
        smi.wait()
    samples = parse_smi(smi_path.read_text())
    for r in rows:
        r.update(summarize(samples, r["t0"], r["t1"]))
        print(f"{r['kernel']:<12} ctx={a.ctx} B={a.batch} P={a.page} | {r['us']:.1f}us/replay | sm "
              f"{r.get('sm_mhz_median', 0):.0f} MHz (min {r.get('sm_mhz_min', 0):.0f}) | power "
              f"{r.get('watts_median', 0):.0f} W (max {r.get('watts_max', 0):.0f}) | reasons {r.get('reasons')}",
              flush=True)
    res = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
               command=" ".join(sys.argv), seconds=a.seconds, rows=rows)
    (out / "power_clock.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
