#!/usr/bin/env python
"""quantize_pages development bench (GPU, torch + Triton only): correctness of every launch variant against the
pure-torch reference run on the CPU, then old vs new timings for the server's few-pages case, in one call.

Timing: triton.testing.do_bench (median; a 256 MB L2 flush before each call) of a CUDA-graph replay, as
bench/bench_kernels.py times it: ``1x`` = one launch quantizing one page per request (B pages of Llama-3-8B
layer shapes: Hkv=8, D=128, bf16); ``32L/32`` = one graph of 32 such launches, each on its own layer's source rows
and page store, divided by 32 (the server runs one launch per layer inside its decode graph). ``floor``: the same
timer around an empty kernel, and around a kernel that makes the quantizer's two dependent cold loads (row id,
then one source element) and one store: below those no quantize launch can go.

Variants: v0 = the previous kernel (bench/quantize_pages_v0.py, grid (n, Hkv, 2), a whole [P, D] tile per
program); new = sgl_spec/kernels/quantize_pages/triton.py with launch_config's choice; eN/wM = new with N source elements per thread
at M warps; tile = new code on the old grid (whole tiles).

    python bench/dev_quantize.py --out $OUT                 # B = 1, 8, 32; P = 64, 128 (< 3 minutes on an H100)
    python bench/dev_quantize.py --sass                     # CPU only: sm_90 registers/instructions per variant
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).parent))
import quant_criterion as qc  # noqa: E402
from dev_timing import capture_graph, copy_gbps  # noqa: E402
import quantize_pages_v0  # noqa: E402
from kernel_cases import HKV, D, DTYPE, bytes_quantize  # noqa: E402
from sgl_spec.kernels.quantize_pages import triton as qp  # noqa: E402
from sgl_spec.kernels.quantize_pages.ref import quantize_pages as quantize_cpu  # noqa: E402
from sgl_spec.kvcache.format import KVFormat, unpack_nibbles  # noqa: E402

NAMES = ("k_upper", "k_lower", "v_upper", "v_lower", "k_scale", "k_zero", "v_scale", "v_zero")


def variants(P: int):
    """name -> callable(src_k, src_v, rows, ids, store)."""
    half = D // 2

    def split(ept, nw):
        return dict(key_cols=max(1, min(half, ept * 16 * nw // P)), val_rows=max(1, min(P, ept * 16 * nw // half)),
                    num_warps=nw)

    kw = {"new": {}, "e8w4": split(8, 4), "e16w4": split(16, 4), "e32w4": split(32, 4), "e8w2": split(8, 2),
          "e16w8": split(16, 8),
          "tile": dict(key_cols=half, val_rows=P, num_warps=max(4, min(16, triton.next_power_of_2(P * D // 1024))))}
    out = {"v0": quantize_pages_v0.quantize_pages}
    out.update({k: (lambda *a, kw=v: qp.quantize_pages(*a, **kw)) for k, v in kw.items()})
    return out


@triton.jit
def _empty_kernel(x_ptr):
    pass


@triton.jit
def _two_hop_kernel(row_ptr, src_ptr, dst_ptr):
    r = tl.load(row_ptr)
    tl.store(dst_ptr, tl.load(src_ptr + r))


def graph_time(fn):
    return triton.testing.do_bench(capture_graph(fn).replay, warmup=20, rep=80, return_mode="median")


# ---- correctness ---------------------------------------------------------------------------------------------------
def source(T, dtype, gen):
    """Keys with per-channel spread/offset and a few outliers (as real K), values plain normal."""
    k = torch.randn(T, HKV, D, generator=gen) * (0.3 + 4 * torch.rand(D, generator=gen)) + torch.randn(D, generator=gen)
    k[torch.randint(0, T, (8,), generator=gen), torch.randint(0, HKV, (8,), generator=gen), 5] = 40.0
    return k.to(dtype), torch.randn(T, HKV, D, generator=gen).to(dtype)


CASES = ((64, 1, DTYPE), (64, 32, DTYPE), (128, 8, DTYPE), (128, 3, torch.float16), (64, 5, torch.float32))


def check(log, device="cuda", cases=CASES):
    """Every variant vs the CPU reference on the same random pages: scales/zeros must be identical; codes are
    counted (bit-identical is the expectation; a difference is only legitimate within float rounding of a
    quantization boundary, which is reported)."""
    gen = torch.Generator().manual_seed(2024)
    ok = True
    for P, B, dtype in cases:
        T = (B + 2) * P + 7
        k, v = source(T, dtype, gen)
        rows = torch.randperm(T - P + 1, generator=gen)[:B]  # unaligned rows
        ids = torch.randperm(B + 3, generator=gen)[:B].to(torch.int32)
        fmt = KVFormat(P, HKV, D)
        want = quantize_cpu(k, v, rows, ids, fmt.alloc(B + 3, "cpu"))
        kc, vc, rc, ic = (t.to(device) for t in (k, v, rows, ids))
        for name, fn in variants(P).items():
            if dtype != DTYPE and name not in ("new", "v0"):
                continue  # other dtypes: one compile each of old and new is enough
            got = fmt.alloc(B + 3, device)
            for t in (got.k_upper, got.k_lower, got.v_upper, got.v_lower):
                t.fill_(0xAB)
            fn(kc, vc, rc, ic, got)
            idx = ids.long()
            scales_ok = all(torch.equal(getattr(got, n)[idx].cpu(), getattr(want, n)[idx]) for n in NAMES[4:])
            diff = sum(int((unpack_nibbles(getattr(got, n)[idx].cpu()) != unpack_nibbles(getattr(want, n)[idx]))
                           .sum()) for n in NAMES[:4])
            ok &= scales_ok and diff == 0
            log(f"check P={P} B={B} {str(dtype)[6:]} {name}: scales/zeros {'identical' if scales_ok else 'DIFFER'}, "
                f"{diff} of {4 * B * HKV * P * D} codes differ from the reference")
    return ok


# ---- timing --------------------------------------------------------------------------------------------------------
def bench(batches, pages, gbps, fa3_us, log):
    rows = []
    wbytes = qc.decode_weight_bytes()
    for P in pages:
        for B in batches:
            bufs = qc.layer_buffers(B, P, 32, "cuda")
            k, v, store = bufs[0][0]
            parts = []
            for name, fn in variants(P).items():
                one = graph_time(lambda fn=fn: fn(k, v, bufs[1], bufs[2], store))
                layers = graph_time(qc.layer_graph_call(fn, bufs)) / 32
                row = dict(variant=name, batch=B, page=P, us=one * 1e3, us_per_layer_in_32=layers * 1e3,
                           bw=bytes_quantize(P, B) / one / 1e6 / gbps)
                fa3 = fa3_us.get((B, P))
                if fa3:  # the criterion with the FA3 time recorded on the same device kind
                    step_lb_us = 32 * fa3 + wbytes / gbps / 1e3
                    row.update(fa3_us_recorded=fa3, frac_step_lb=32 * row["us"] / step_lb_us,
                               frac_layers_step_lb=32 * row["us_per_layer_in_32"] / step_lb_us)
                rows.append(row)
                parts.append(f"{name} {row['us']:.1f}/{row['us_per_layer_in_32']:.1f}"
                             + (f" ({row['frac_step_lb']:.1%}/{row['frac_layers_step_lb']:.1%})" if fa3 else ""))
            log(f"B={B:>2} P={P:>3} 1x/32L us (frac): " + " | ".join(parts))
            torch.cuda.empty_cache()
    return rows


def recorded_fa3(path: Path):
    """{(B, P): FA3 decode us at 32k} from a bench_kernels.py result, if there is one for this device."""
    if not path.exists():
        return {}, None
    d = json.loads(path.read_text())
    res = d.get("quantize_criterion", {}).get("results", [])
    return {(q["batch"], q["page"]): q["bf16_decode_us"] for q in res}, d.get("device")


def sass():
    import sass_report as sr

    types = dict(k_ptr="*bf16", v_ptr="*bf16", row_ptr="*i64", page_ptr="*i32", ks_ptr="*fp16", kz_ptr="*fp16",
                 vs_ptr="*fp16", vz_ptr="*fp16")
    ones = dict(sk_d=1, sv_d=1, kp_j=1, vp_j=1, kg_d=1, vg_n=1)  # unit strides: the JIT specializes them to 1
    for P in (64, 128):
        for ept in (8, 16, 32):
            cj, tp, nw = qp.launch_config(P, D, {8: 8, 16: 256, 32: 1024}[ept])
            const = dict(P=P, DH=D // 2, BLOCK_DH=D // 2, CJ=cj, TP=tp, NK=D // 2 // cj, EVEN_K=True, **ones)
            cc = sr.compile_sm90(qp._quantize_pages_kernel, types, const, num_warps=nw, enable_fp_fusion=False,
                                 plain=("sk_t", "sk_h", "kp_page", "kp_h"))  # the kernel's alignment exceptions
            sr.report(cc, f"quantize_pages P={P} key_cols={cj} val_rows={tp} warps={nw} ({ept} elements/thread)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/dev_quantize")
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--page", default="64,128")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--sass", action="store_true", help="CPU: compile for sm_90 and report, no GPU needed")
    a = ap.parse_args()
    if a.sass:
        return sass()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)

    gbps = copy_gbps()
    dev = torch.cuda.get_device_name()
    fa3, fa3_dev = recorded_fa3(Path(__file__).parent / "results" / "kernels.json")
    if fa3_dev != dev:
        fa3 = {}
    log(f"[device] {dev} copy {gbps:.0f} GB/s torch {torch.__version__} triton {triton.__version__}; "
        f"FA3 32k decode times for frac: {'bench/results/kernels.json (' + fa3_dev + ')' if fa3 else 'none'}")
    res = dict(device=dev, copy_gbps=gbps, argv=sys.argv, weights_bytes=qc.decode_weight_bytes())
    if not a.skip_check:
        res["check_ok"] = check(log)
        log(f"[check] {'all variants bit-identical to the reference' if res['check_ok'] else 'MISMATCH (see above)'}")
    x = torch.zeros(16, dtype=torch.int64, device="cuda")
    big = torch.zeros(1 << 20, dtype=torch.int64, device="cuda")
    res["floor_us"] = dict(empty=graph_time(lambda: _empty_kernel[(1,)](x)) * 1e3,
                           two_hop=graph_time(lambda: _two_hop_kernel[(1,)](x, big, x[1:])) * 1e3)
    log(f"[floor] empty kernel {res['floor_us']['empty']:.2f} us, two dependent cold loads + store "
        f"{res['floor_us']['two_hop']:.2f} us")
    res["rows"] = bench([int(b) for b in a.batch.split(",")], [int(p) for p in a.page.split(",")], gbps, fa3, log)
    (out / "dev_quantize.json").write_text(json.dumps(res, indent=1))
    (out / "dev_quantize.log").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
