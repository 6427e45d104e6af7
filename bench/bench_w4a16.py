#!/usr/bin/env python
"""The weight GEMMs of one draft pass, per engine: the checkpoint's BF16 weights (cuBLAS through ``F.linear``, what a
draft reads without ``--quantspec-draft-weights int4``) against the 4-bit copy through SGLang's Marlin GEMM and
through our Triton kernel (sgl_spec/kernels/w4a16_linear/), at a few batch rows M.

One pass = every layer's qkv, o, gate_up and down projection with its own weights (``--layers`` of the
``--shape``; default the Llama-3-8B shape, 32 layers: 14 GB in BF16, 3.7 GB as the 4-bit copy), recorded once in a
CUDA graph per engine and M and replayed (medians of ``--reps`` replays of ``--inner`` passes each, CUDA events).
In the same run a device-to-device copy of the 4-bit copy's bytes gives the bandwidth the GEMMs are measured
against (``copy_frac`` = the GEMM's weight bytes per second / the copy's bytes read + written per second: 1.0
streams the weights as fast as the copy moves bytes).

  python bench/bench_w4a16.py --out bench/results/w4a16.json
  python bench/bench_w4a16.py --smoke      # CPU, two tiny layers, twin only: the structure
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import common  # noqa: E402
from sgl_spec.kernels import w4a16_linear as w4  # noqa: E402
from sgl_spec.kernels.w4a16_linear import ref  # noqa: E402

SHAPES = {  # hidden, intermediate, q heads, kv heads, head dim
    "llama3-8b": (4096, 14336, 32, 8, 128),
    "qwen3-8b": (4096, 12288, 32, 8, 128),
    "tiny": (256, 512, 4, 2, 64),
}


def layer_shapes(name):
    h, inter, hq, hkv, d = SHAPES[name]
    return [("qkv", (hq + 2 * hkv) * d, h), ("o", h, hq * d), ("gate_up", 2 * inter, h), ("down", h, inter)]


def timed(fn, dev, reps, inner):
    fn()
    if dev != "cuda":
        import time

        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / inner)
    return statistics.median(ts)


def main(argv=None):
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="llama3-8b", choices=sorted(SHAPES))
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--m", type=ints, default=[1, 8, 32])
    ap.add_argument("--triton-configs", default="32:512:3:0,64:256:3:0,32:512:3:0:dot",
                    help="the Triton kernel's launches to time, BLOCK_N:BLOCK_K:STAGES:WARPS[:PATH] (BLOCK_K: the "
                         "largest the launcher may take; WARPS 0: the path's default; PATH auto, gemv or dot; K splits "
                         "as the launcher chooses), comma-separated; each one compiles its own kernels")
    ap.add_argument("--engines", default="bf16,marlin,triton", help="GPU engines, timed in this order (Marlin's JIT "
                    "build comes at its first use)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--inner", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() and not a.smoke else "cpu"
    if a.smoke:
        a.shape, a.layers, a.m, a.reps, a.inner = "tiny", 2, [1, 3], 1, 1
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    g = torch.Generator(device=dev).manual_seed(0)
    weights = [(kind, torch.randn(n, k, generator=g, device=dev, dtype=dtype) * 0.02)
               for _ in range(a.layers) for kind, n, k in layer_shapes(a.shape)]
    codes = [ref.quantize(w) for _, w in weights]
    wanted = a.engines.split(",") if dev == "cuda" else ["bf16", "twin"]
    if "triton" in wanted:
        from sgl_spec.kernels.w4a16_linear import triton as wt

        configs = [tuple(int(v) for v in c.split(":")[:4]) + ((c.split(":") + ["auto"])[4],)
                   for c in a.triton_configs.split(",") if c]
        tiles = {bn: [wt.prepare(q, s, block_n=bn) for q, s in codes] for bn in {c[0] for c in configs}}
    marlin = []  # built at first use: SGLang JIT-compiles its Marlin kernels then
    bytes_bf16 = sum(w.nbytes for _, w in weights)
    bytes_w4 = sum(q.nbytes + s.nbytes for q, s in codes)
    src = torch.empty(bytes_w4, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    copy_ms = timed(lambda: dst.copy_(src), dev, a.reps, a.inner)
    copy_tbps = 2 * bytes_w4 / copy_ms / 1e9  # read + write
    rows = []
    meta = {**common.run_meta(dev), "torch": torch.__version__,
            "note": "the weight GEMMs of one draft pass (every layer's qkv / o / gate_up / down, own weights) per "
                    "engine, CUDA-graph replays; copy_frac = weight bytes per second / a device copy's bytes read + "
                    "written per second, same run"}
    for M in a.m:
        xs = {k: torch.randn(M, k, generator=g, device=dev, dtype=dtype) for k in {w.shape[1] for _, w in weights}}
        outs = [torch.empty(M, w.shape[0], device=dev, dtype=dtype) for _, w in weights]
        runs = {}
        for engine in wanted:
            if engine == "bf16":
                runs["bf16"] = lambda: [torch.nn.functional.linear(xs[w.shape[1]], w, out=o)
                                        for (_, w), o in zip(weights, outs)]
            elif engine == "triton":
                for bn, bk, stages, warps, path in configs:
                    runs[f"triton_{bn}x{bk}s{stages}w{warps}{'' if path == 'auto' else '_' + path}"] = (
                        lambda bn=bn, bk=bk, stages=stages, warps=warps, path=path: [
                            wt.w4a16_linear(xs[t.k], t, out=o, block_k_max=bk, num_stages=stages,
                                            num_warps=warps or None, path=path) for t, o in zip(tiles[bn], outs)])
            elif engine == "marlin":
                def run_marlin():
                    if not marlin:
                        marlin.extend(w4.prepare(w, "marlin") for _, w in weights)
                    return [w4.w4a16_linear(xs[c.k], c) for c in marlin]
                runs["marlin"] = run_marlin
            elif engine == "twin":
                runs["twin"] = lambda: [ref.w4a16_linear(xs[q.shape[0] * 8], q, s, out=o)
                                        for (q, s), o in zip(codes, outs)]
            else:
                raise SystemExit(f"--engines: unknown engine {engine!r} (bf16, triton, marlin)")
        row = {"m": M, "shape": a.shape, "layers": a.layers, "bytes_bf16": bytes_bf16, "bytes_w4": bytes_w4,
               "copy_ms": copy_ms, "copy_tbps": copy_tbps}
        for name, fn in runs.items():
            try:
                ms = timed(fn, dev, a.reps, a.inner)
            except Exception as e:  # a launch configuration the compiler or the device refuses
                row[f"{name}_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                print(f"M={M:3d} {name}: {row[f'{name}_error']}", flush=True)
                continue
            nbytes = bytes_bf16 if name == "bf16" else bytes_w4
            row[f"{name}_ms"] = ms
            row[f"{name}_tbps"] = nbytes / ms / 1e9
            row[f"{name}_copy_frac"] = row[f"{name}_tbps"] / copy_tbps  # bytes moved per second, as the copy's
            print(f"M={M:3d} {name}: {ms:.3f} ms, {row[f'{name}_copy_frac']:.2f} of the copy bandwidth", flush=True)
        rows.append(row)
        print(f"M={M:3d} " + " | ".join(f"{k[:-3]} {v:7.3f} ms" for k, v in row.items() if k.endswith("_ms")
                                        and k != "copy_ms") + f" | copy of the 4-bit bytes {copy_ms:.3f} ms "
              f"({copy_tbps:.2f} TB/s r+w)", flush=True)
        if a.out:  # after every M: a run cut short keeps what it measured
            common.write_json(a.out, {**meta, "rows": rows})
    if a.out:
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
