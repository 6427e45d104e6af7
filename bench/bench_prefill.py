#!/usr/bin/env python
"""EXTEND (prefill) attention under the INT8 view, one layer call, every engine against stock SGLang's BF16 prefill
attention on the same shape (sgl_spec/kernels/extend_attention/, sgl_spec/kvcache/prefill.py):

* ``sdpa_fp16_ms``: the per-request torch path (dequantized pages, SDPA in fp16 with a mask; the CPU's engine);
* ``triton_ms``: the batched Triton engine (INT8 pages dequantized in registers);
* ``fa3_ms``: the FA3 engine (INT8 pages dequantized once into a paged copy, FlashAttention-3 twice, merged;
  the server's engine on Hopper); ``fa3_segments_ms``: the same copy plus each query page's own page, one FA3 call;
* ``stock_fa3_ms``: stock SGLang's prefill attention on Hopper - FlashAttention-3 causal over the BF16 keys of the
  prefix and the chunk (sgl_kernel's ``flash_attn_varlen_func``); ``bf16_sdpa_ms``: causal SDPA over the same keys;
* ``quantize_ms``: quantizing the chunk's complete pages into the planes (``quantize_pages``, the kernel the backend
  runs before the attention), measured on its own;
* ``einsum_fp32_ms``: the fp32 reference path, up to ``--einsum-max-tokens`` keys.

One call = one request's chunk of new tokens after a cached prefix, at the layer shapes ``--shapes Hq:Hkv:D``
(default Llama-3-8B 32:8:128 and pycode-30m 4:2:128), page 64. Medians of CUDA-event timings after a warm-up;
every engine's output compared with the torch path's (``*_max_abs_diff``). Prints one line per configuration and
writes JSON.

  python bench/bench_prefill.py --out bench/results/prefill.json
  python bench/bench_prefill.py --smoke        # CPU, tiny shapes: the structure only (FA3 through the tests' stand-in)
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


SHAPE_NAMES = {(32, 8, 128): "llama3-8b", (4, 2, 128): "pycode-30m"}
DEFAULT_ENGINE_MS = "fa3_ms"  # the server's EXTEND attention on Hopper (engine.prefill_engine)


def summary_fields(row: dict) -> dict:
    """The row's summary: kind, model_shape, new_tokens, cached_tokens, ms (the server's default engine) and
    stock_ms (stock SGLang's FA3) beside the per-engine columns."""
    shape = (row["hq"], row["hkv"], row["head_dim"])
    return {"kind": "prefill_attention", "model_shape": SHAPE_NAMES.get(shape, "{}:{}:{}".format(*shape)),
            "new_tokens": row["chunk"], "cached_tokens": row["prefix"], "ms": row.get(DEFAULT_ENGINE_MS),
            "stock_ms": row.get("stock_fa3_ms"), **row}


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


def _engines(dev, smoke):
    """(fa3 module, its flash entry points, triton module or None) for this device."""
    from sgl_spec.kernels.extend_attention import fa3 as xf

    if dev == "cuda":
        from sgl_spec.kernels.extend_attention import triton as xt

        return xf, xf._sgl_flash(), xt
    sys.path.insert(0, str(REPO / "tests" / "support"))
    import fa3_standin

    return xf, fa3_standin, None


def main(argv=None):
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", type=ints, default=[0, 32768])
    ap.add_argument("--chunk", type=ints, default=[8192, 32768, 65536])
    ap.add_argument("--shapes", default="32:8:128,4:2:128", help="Hq:Hkv:D layer shapes")
    ap.add_argument("--page", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--einsum-max-tokens", type=int, default=16384, help="skip the slow fp32 path beyond this")
    ap.add_argument("--sdpa-max-chunk", type=int, default=32768, help="skip the masked SDPA paths beyond this")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() and not a.smoke else "cpu"
    if a.smoke:
        a.prefix, a.chunk, a.shapes, a.page, a.reps = [0, 96], [80], "4:2:32", 32, 1
    from sgl_spec.kernels.extend_attention import extend_plan, paged_plan, segment_plan
    from sgl_spec.kernels.extend_attention import fa3_segments as xs
    from sgl_spec.kernels.quantize_pages import quantize_pages

    xf, flash, xt = _engines(dev, a.smoke)
    P = a.page
    rows = []
    name = torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"
    for shape in a.shapes.split(","):
        Hq, Hkv, D = (int(x) for x in shape.split(":"))
        scale = D ** -0.5
        for chunk in a.chunk:
            for prefix in a.prefix:
                q, k, v, store, ids = case(prefix, chunk, Hq, Hkv, D, P, dev)
                base = (prefix // P) * P
                args = (q, k[prefix:], v[prefix:], k[base:prefix], v[base:prefix], store, ids, prefix, scale)
                row = {"prefix": prefix, "chunk": chunk, "hq": Hq, "hkv": Hkv, "head_dim": D, "page": P,
                       "device": name}
                ref = torch.empty_like(q)
                if chunk <= a.sdpa_max_chunk:
                    row["sdpa_fp16_ms"] = timed(lambda: extend_attention(*args, out=ref, impl="sdpa"), dev, a.reps)
                else:  # the reference output for the comparisons, untimed
                    extend_attention(*args, out=ref, impl="sdpa")
                prev = torch.zeros(1, P, Hkv, D, dtype=k.dtype, device=dev)
                prev[0, :prefix - base] = k[base:prefix]
                prev_v = torch.zeros_like(prev)
                prev_v[0, :prefix - base] = v[base:prefix]
                pt = ids[None]
                fa3_plan = paged_plan([prefix], [chunk], pt, P)
                out = torch.empty_like(q)
                row["fa3_ms"] = timed(lambda: xf.extend_attention(q, k[prefix:], v[prefix:], prev, prev_v, store,
                                                                  fa3_plan, scale, out=out, flash=flash), dev, a.reps)
                row["fa3_max_abs_diff"] = (out.float() - ref.float()).abs().max().item()
                seg_plan = segment_plan([prefix], [chunk], pt, P)
                row["fa3_segments_ms"] = timed(lambda: xs.extend_attention(
                    q, k[prefix:], v[prefix:], prev, prev_v, store, seg_plan, scale, out=out, flash=flash), dev, a.reps)
                row["fa3_segments_max_abs_diff"] = (out.float() - ref.float()).abs().max().item()
                if xt is not None:
                    plan = extend_plan([prefix], [chunk], Hq // Hkv, P, dev, D)
                    row["triton_ms"] = timed(lambda: xt.extend_attention(q, k[prefix:], v[prefix:], prev, prev_v,
                                                                         store, pt, plan, scale, out=out), dev, a.reps)
                    row["triton_max_abs_diff"] = (out.float() - ref.float()).abs().max().item()
                # stock: causal attention over the BF16 keys of prefix + chunk (bottom-right aligned)
                cu_q = torch.tensor([0, chunk], dtype=torch.int32, device=dev)
                cu_k = torch.tensor([0, prefix + chunk], dtype=torch.int32, device=dev)
                row["stock_fa3_ms"] = timed(lambda: flash.flash_attn_varlen_func(
                    q, k, v, cu_q, cu_k, max_seqlen_q=chunk, max_seqlen_k=prefix + chunk, softmax_scale=scale,
                    causal=True), dev, a.reps)
                if chunk <= a.sdpa_max_chunk:
                    kk = k[None].transpose(1, 2).repeat_interleave(Hq // Hkv, 1)
                    vv = v[None].transpose(1, 2).repeat_interleave(Hq // Hkv, 1)
                    qq = q[None].transpose(1, 2)
                    mask = torch.ones(chunk, prefix + chunk, dtype=torch.bool, device=dev).tril(prefix)
                    row["bf16_sdpa_ms"] = timed(lambda: torch.nn.functional.scaled_dot_product_attention(
                        qq, kk, vv, attn_mask=mask, scale=scale), dev, a.reps)
                    del kk, vv, mask
                if prefix + chunk <= a.einsum_max_tokens:
                    out_e = torch.empty_like(q)
                    row["einsum_fp32_ms"] = timed(lambda: extend_attention(*args, out=out_e, impl="einsum"), dev,
                                                  a.reps)
                    row["max_abs_diff"] = (ref.float() - out_e.float()).abs().max().item()
                # the chunk's complete pages into the planes (what the backend does before attending;
                # last: it overwrites pages the attention paths above read)
                n_pages = chunk // P
                rows_q = (torch.arange(n_pages, device=dev) * P).long()
                dst = torch.arange(n_pages, device=dev, dtype=torch.int32) % store.k_upper.shape[0]
                kq, vq = k[prefix:prefix + n_pages * P], v[prefix:prefix + n_pages * P]
                row["quantize_ms"] = timed(lambda: quantize_pages(kq, vq, rows_q, dst, store), dev, a.reps)
                rows.append(summary_fields(row))
                f = lambda key: f"{row[key]:8.2f}" if key in row else "       -"  # noqa: E731
                print(f"shape {Hq}:{Hkv}:{D} prefix {prefix:6d} chunk {chunk:6d} | stock fa3 {f('stock_fa3_ms')} ms | "
                      f"fa3 {f('fa3_ms')} | fa3 one call {f('fa3_segments_ms')} | triton {f('triton_ms')} | torch sdpa {f('sdpa_fp16_ms')} | quantize "
                      f"{f('quantize_ms')} | fa3 x stock {row['fa3_ms'] / row['stock_fa3_ms']:.2f} | "
                      f"max|diff| fa3 {row['fa3_max_abs_diff']:.2e}", flush=True)
                del q, k, v, store
                if dev == "cuda":
                    torch.cuda.empty_cache()
    doc = {**common.run_meta(dev), "torch": torch.__version__,
           "note": "one layer call of the EXTEND attention under the INT8 view per engine; stock_fa3_ms is stock "
                   "SGLang's BF16 prefill attention (FlashAttention-3, causal) on the same shape", "rows": rows}
    if a.out:
        common.write_json(a.out, doc)
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
