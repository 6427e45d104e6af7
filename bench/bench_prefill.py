#!/usr/bin/env python
"""EXTEND (prefill) attention under the INT8 view, one layer call: the fp32 einsum path vs the SDPA path (fp16,
memory-efficient kernel), and stock SDPA over the same keys in BF16 with a causal mask as a yardstick (what a BF16
prefill chunk's attention costs; not the same function). sgl_spec/kvcache/prefill.py.

One call = one request's chunk of ``--chunk`` new tokens after ``--prefix`` cached tokens, Llama-3-8B layer shapes
(Hq 32, Hkv 8, D 128), page 64. Medians of CUDA-event timings after a warm-up; outputs of the two paths compared.
Prints one line per configuration and writes JSON.

  python bench/bench_prefill.py --out bench/results/prefill.json
  python bench/bench_prefill.py --smoke        # CPU, tiny shapes: the structure only
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import common  # noqa: E402
from sgl_spec.kvcache.format import KVFormat  # noqa: E402
from sgl_spec.kernels.quantize_pages.ref import quantize_pages_ref  # noqa: E402
from sgl_spec.kvcache.prefill import extend_attention  # noqa: E402


def case(prefix, chunk, Hq, Hkv, D, P, dev, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    n_all = prefix + chunk
    k = torch.randn(n_all, Hkv, D, generator=g).to(dev, torch.bfloat16)
    v = torch.randn(n_all, Hkv, D, generator=g).to(dev, torch.bfloat16)
    q = torch.randn(chunk, Hq, D, generator=g).to(dev, torch.bfloat16)
    npg = (n_all - 1) // P
    store = KVFormat(P, Hkv, D).alloc(npg + 1, device=dev)
    for p0 in range(0, npg, 256):  # quantize in slices (reference kernel, fp32 temporaries)
        p1 = min(npg, p0 + 256)
        pk = k[p0 * P:p1 * P].float().view(p1 - p0, P, Hkv, D).transpose(1, 2)
        pv = v[p0 * P:p1 * P].float().view(p1 - p0, P, Hkv, D).transpose(1, 2)
        for name, t in quantize_pages_ref(pk, pv).items():
            getattr(store, name)[p0:p1].copy_(t)
    return q, k, v, store, torch.arange(npg + 1, dtype=torch.int32, device=dev)


def timed(fn, dev, reps):
    fn()
    if dev == "cuda":
        torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        if dev == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            ts.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main(argv=None):
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", type=ints, default=[0, 8192, 32768, 57344])
    ap.add_argument("--chunk", type=int, default=8192)
    ap.add_argument("--heads", default="32:8")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--page", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--einsum-max-prefix", type=int, default=57344, help="skip the slow fp32 path beyond this")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() and not a.smoke else "cpu"
    if a.smoke:
        a.prefix, a.chunk, a.heads, a.head_dim, a.page, a.reps = [0, 96], 80, "4:2", 32, 32, 1
    Hq, Hkv = (int(x) for x in a.heads.split(":"))
    D, P = a.head_dim, a.page
    scale = D ** -0.5
    rows = []
    name = torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"
    for prefix in a.prefix:
        q, k, v, store, ids = case(prefix, a.chunk, Hq, Hkv, D, P, dev)
        base = (prefix // P) * P
        args = (q, k[prefix:], v[prefix:], k[base:prefix], v[base:prefix], store, ids, prefix, scale)
        out_s = torch.empty_like(q)
        t_sdpa = timed(lambda: extend_attention(*args, out=out_s, impl="sdpa"), dev, a.reps)
        row = {"prefix": prefix, "chunk": a.chunk, "hq": Hq, "hkv": Hkv, "head_dim": D, "page": P,
               "sdpa_fp16_ms": t_sdpa, "device": name}
        # yardstick: BF16 causal SDPA of the chunk over prefix + chunk keys (what stock prefill attention costs)
        kk = k[None].transpose(1, 2).repeat_interleave(Hq // Hkv, 1)
        vv = v[None].transpose(1, 2).repeat_interleave(Hq // Hkv, 1)
        qq = q[None].transpose(1, 2)
        mask = torch.ones(a.chunk, prefix + a.chunk, dtype=torch.bool, device=dev).tril(prefix)
        row["bf16_sdpa_ms"] = timed(lambda: torch.nn.functional.scaled_dot_product_attention(
            qq, kk, vv, attn_mask=mask, scale=scale), dev, a.reps)
        del kk, vv, mask
        if prefix <= a.einsum_max_prefix:
            out_e = torch.empty_like(q)
            row["einsum_fp32_ms"] = timed(lambda: extend_attention(*args, out=out_e, impl="einsum"), dev, a.reps)
            row["speedup"] = row["einsum_fp32_ms"] / t_sdpa
            row["max_abs_diff"] = (out_s.float() - out_e.float()).abs().max().item()
        rows.append(row)
        print(f"prefix {prefix:6d} chunk {a.chunk} Hq {Hq} Hkv {Hkv} | sdpa fp16 {t_sdpa:9.2f} ms | einsum fp32 "
              f"{row.get('einsum_fp32_ms', float('nan')):9.2f} ms | x{row.get('speedup', float('nan')):.1f} | "
              f"bf16 causal sdpa {row['bf16_sdpa_ms']:8.2f} ms | max|diff| {row.get('max_abs_diff', float('nan')):.2e}",
              flush=True)
        del q, k, v, store
        if dev == "cuda":
            torch.cuda.empty_cache()
    doc = {**common.run_meta(dev), "torch": torch.__version__,
           "note": "one layer call of extend_attention; bf16_sdpa_ms is stock causal attention over BF16 keys "
                   "(yardstick, not the same function)", "rows": rows}
    if a.out:
        common.write_json(a.out, doc)
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
