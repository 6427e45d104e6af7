#!/usr/bin/env python
"""Kernel development bench (GPU): correctness of the Triton kernels against their references on fresh random inputs,
then timings of launch-parameter variants, in one call (the device machine is leased by the minute).

Timing: bench/l2_timer.py (do_bench's procedure, median; a 256 MB buffer read before each call, ``--l2-flush zero``:
zeroed as do_bench does) of a CUDA-graph replay of one launcher call, so host launch overhead (Python checks, two
launches) stays out of the number as it does in SGLang's graphs; ``--eager`` times plain calls too. bw = bytes that
must move / time / measured copy bandwidth.

    python bench/dev_kernels.py --out $OUT                       # default grid
    python bench/dev_kernels.py --draft "65536:1:64,131072:8:64" --variants "ns=1x;ns=2x;st=4"
    python bench/dev_kernels.py --draft "131072:1:64" --draft-sparse "131072:1:64" --variants "fs=1;fs=0,nr=0" \
        --verify "" --quantize ""                                  # draft variants, dense and 7% sparse
    python bench/dev_kernels.py --draft "" --quantize "" --out $OUT     # verify only: check, then new / off / v0

The verify variants, their A/B kernel forms and checks live in bench/dev_verify.py; the shared timing in
bench/dev_timing.py.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).parent))
from dev_timing import _TIMING, alias_pages, copy_gbps, time_variant, timer  # noqa: E402
from dev_verify import bench_verify, check_verify  # noqa: E402
from kernel_cases import (HKV, HQ, D, DTYPE, SM_SCALE, bytes_draft, bytes_quantize, draft_args,  # noqa: E402
                          quant_pages, relayout_scales)
from l2_timer import FLUSH_MODES, L2Flush  # noqa: E402


def parse_variants(text):
    """'ns=2x;st=4;nw=8' -> [{}, {'ns': '2x'}, ...] (the default configuration first)."""
    out = [{}]
    for v in filter(None, (text or "").split(";")):
        d = {}
        for kv in v.split(","):
            k, val = kv.split("=")
            d[k.strip()] = val.strip()
        out.append(d)
    return out


def draft_kwargs(var, B, maxp, P):
    from sgl_spec.kernels.draft_decode import triton as dd

    kw = {}
    if "ns" in var:
        v = var["ns"]
        if v.endswith("x"):
            ppsm = dd.launch_config(P, 16)[4]
            base = dd.num_splits_for(B, HKV, maxp, torch.cuda.get_device_properties(0).multi_processor_count, ppsm)
            kw["num_splits"] = max(1, int(round(base * float(v[:-1]))))
        else:
            kw["num_splits"] = int(v)
    if "st" in var:
        kw["num_stages"] = int(var["st"])
    if "nw" in var:
        kw["num_warps"] = int(var["nw"])
    if "hpc" in var:
        kw["heads_per_prog"] = int(var["hpc"])
    if "pf" in var:  # prefetch: 0 off, 1 one page in flight (default)
        kw["prefetch"] = int(var["pf"])
    if "fs" in var:
        kw["flat_scales"] = bool(int(var["fs"]))
    if "nr" in var:
        kw["maxnreg"] = int(var["nr"])  # 0: no register cap
    if "mps" in var:
        kw["min_pages_per_split"] = int(var["mps"])
    if "mc" in var:
        kw["merge_chunk"] = int(var["mc"])
    if "pps" in var:  # programs an SM for the split rule (with nr: 128 registers -> 4)
        kw["programs_per_sm"] = int(var["pps"])
    if "kf" in var:  # keys in the wgmma A fragment's order (P = 64, D = 128)
        kw["key_frag"] = bool(int(var["kf"]))
    if "hb" in var:  # hot tokens a loop step
        kw["hot_block"] = int(var["hb"])
    if "hn" in var:  # hot dots on the 16-bit operands as stored
        kw["hot_native"] = bool(int(var["hn"]))
    if "gst" in var:  # Gluon page programs: strided split partition
        kw["split_stride"] = bool(int(var["gst"]))
    if "fh" in var:  # Gluon: the hot-token programs in the page launch (1) or a Triton launch before it (0)
        kw["fused_hot"] = bool(int(var["fh"]))
    if "md" in var:  # merge programs a (request, head): channel blocks
        kw["merge_blocks"] = int(var["md"])
    if "as" in var:  # Gluon page programs: pages through a shared-memory ring of this many slots (0: registers)
        kw["stages"] = int(var["as"])
    if "tma" in var:  # Gluon ring: its pages copied by TMA (1) or cp.async (0)
        kw["stream_tma"] = bool(int(var["tma"]))
    if "gl" in var:  # page programs in Gluon (sgl_spec/kernels/draft_decode/gluon_pages.py)
        kw["engine"] = "gluon" if int(var["gl"]) else "triton"
    return kw


# launcher keywords that change the compiled kernels or the split rule (the GPU check covers each combination)
KERNEL_KW = ("prefetch", "flat_scales", "maxnreg", "min_pages_per_split", "merge_chunk", "num_warps", "num_stages",
             "programs_per_sm", "key_frag", "hot_block", "hot_native", "engine", "merge_blocks", "split_stride",
             "fused_hot", "stages", "stream_tma")


def bench_draft(cfgs, variants, gbps, log, eager, sparse=None, kcap=0):
    """Dense page lists, or with ``sparse = (ratio, min_pages, sink_pages)`` select_topk_pages-sized ones (padded to
    ``kcap`` columns when that is wider)."""
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    rows = []
    gen = torch.Generator().manual_seed(0)
    kernel = "draft_dense" if sparse is None else "draft_sparse"
    for ctx, B, P in cfgs:
        lens = [ctx] * B
        qb = quant_pages(lens, P, "cuda", copies=1, gen=gen)[0]
        ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=gen)
        if sparse is not None and kcap > ids.shape[1]:
            ids = torch.nn.functional.pad(ids, (0, kcap - ids.shape[1]))
        ids = alias_pages(ids)
        q = torch.randn(B, HQ, D, device="cuda", dtype=DTYPE)
        out = torch.empty_like(q)
        nbytes = bytes_draft(P, cnt.tolist(), hl.tolist())
        parts = []
        for var in variants:
            kw = draft_kwargs(var, B, ids.shape[1], P)
            st = relayout_scales(qb.store, var.get("sl", "split"))  # sl=packed|alias: the scales' layout
            fn = lambda kw=kw, st=st: draft_decode(q, st, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl,  # noqa
                                            SM_SCALE, out=out, **kw)
            ms = time_variant(fn, var or "default", parts, log)
            if ms is None:
                continue
            r = dict(kernel=kernel, ctx=ctx, batch=B, page=P, variant=var, kwargs=kw, us=ms * 1e3,
                     bw=nbytes / ms / 1e6 / gbps)
            if eager and not var:
                r["eager_us"] = timer(fn, graph=False) * 1e3
            rows.append(r)
            parts.append(f"{'/'.join(f'{k}={v}' for k, v in var.items()) or 'default'} {ms * 1e3:.1f}us "
                         f"{r['bw']:.0%}" + (f" (eager {r['eager_us']:.1f})" if 'eager_us' in r else ""))
        log(f"{kernel} ctx={ctx:>6} B={B:>2} P={P:>3} pages={ids.shape[1]} | " + " | ".join(parts))
        qb = None  # noqa: F841 (free the pool before the next configuration)
        torch.cuda.empty_cache()
    return rows


def bench_quantize(batches, P, gbps, log):
    from sgl_spec.kernels.quantize_pages.triton import quantize_pages
    from sgl_spec.kvcache.format import KVFormat

    rows = []
    for B in batches:
        fmt = KVFormat(P, HKV, D)
        store = fmt.alloc(4 * B, "cuda")
        src = torch.randn(B * P, 2, HKV, D, device="cuda", dtype=DTYPE)
        rows_ = (torch.arange(B, device="cuda") * P).to(torch.int64)
        ids = torch.arange(B, device="cuda", dtype=torch.int32) * 2
        ms = timer(lambda: quantize_pages(src[:, 0], src[:, 1], rows_, ids, store))
        bw = bytes_quantize(P, B) / ms / 1e6 / gbps
        rows.append(dict(kernel="quantize_pages", batch=B, page=P, us=ms * 1e3, bw=bw))
        log(f"quantize B={B:>2} P={P} | {ms * 1e3:.2f}us {bw:.0%}")
    return rows


def check_draft(log, variants=({},)):
    """Fresh random quantized pages (reference quantizer) vs draft_decode_ref: the asm conversion paths on the GPU.
    Every kernel-changing keyword combination of ``variants`` at P = 64 and 128."""
    kws = []
    for var in variants:
        kw = {k: v for k, v in draft_kwargs(var, 1, 1, 64).items() if k in KERNEL_KW}
        kws += [kw] if kw not in kws else []
    worst = 0.0
    for kw in kws:
        worst = max(worst, _check_draft_one(log, kw, (64, 128)))
    return worst


def _check_draft_one(log, kw, pages):
    from sgl_spec.kernels.draft_decode.triton import draft_decode
    from sgl_spec.kernels.draft_decode.ref import draft_decode as ref

    gen = torch.Generator().manual_seed(int(time.time()))
    worst = 0.0
    for P in pages:
        for lens in ([4097], [3 * P + 5, 1, 2 * P, 9 * P + 63]):
            toks = [(torch.randn(n, HKV, D, generator=gen).to("cuda", DTYPE) * 2,
                     torch.randn(n, HKV, D, generator=gen).to("cuda", DTYPE)) for n in lens]
            qb = quant_pages(lens, P, "cuda", tokens=toks, gen=gen)[0]
            ids, cnt, hs, hl = draft_args(qb, gen=gen)
            q = torch.randn(len(lens), HQ, D, generator=gen).to("cuda", DTYPE)
            args = (q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE)
            for ns in (None, 1, 7):
                out = torch.full_like(q, float("nan"))
                draft_decode(*args, out=out, num_splits=ns, **kw)
                want = ref(*args, out=torch.empty(q.shape, device="cuda"))
                err = ((out.float() - want).norm() / want.norm()).item()
                bad = (~torch.isfinite(out)).sum().item()
                worst = max(worst, err if err == err and bad == 0 else float("inf"))
                log(f"check draft {kw or 'default'} P={P} lens={lens} ns={ns}: rel err {err:.2e} nonfinite {bad} -> "
                    f"{'ok' if err < 1e-2 and bad == 0 else 'FAIL'}")
    return worst


def _set_heads(text: str) -> None:
    """--heads HQ:HKV: every case builder here and in kernel_cases reads these module globals at call time."""
    global HQ, HKV
    import kernel_cases

    HQ, HKV = (int(x) for x in text.split(":"))
    kernel_cases.HQ, kernel_cases.HKV = HQ, HKV


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/dev_kernels")
    ap.add_argument("--draft", default="65536:1:64,131072:1:64,262144:1:64,65536:8:64,262144:8:64,131072:1:128")
    ap.add_argument("--variants", default="",
                    help="draft variants ';'-separated, 'k=v,k=v' each: ns=N|Nx nw st nr (0: no cap) pf=0|1 "
                         "fs=0|1 (flat key scales) mps=N (min pages a split) mc=N (merge chunk) pps=N (programs/SM, "
                         "splits) gl=0|1 (Gluon page programs) as=N (their ring's slots) tma=0|1 (its copies by TMA) "
                         "sl=split|packed|alias (the scales' layout, kernel_cases.relayout_scales)")
    ap.add_argument("--draft-sparse", default="",
                    help="ctx:B:P list timed with select_topk_pages-sized lists (--ratio, min 1 page, 1 sink)")
    ap.add_argument("--ratio", type=float, default=0.07)
    ap.add_argument("--min-pages", type=int, default=1,
                    help="--draft-sparse: list length floor (the server's --quantspec-min-pages default is 8)")
    ap.add_argument("--kcap", type=int, default=0,
                    help="--draft-sparse: pad the page lists to this width, as the server's tables are "
                         "(ceil(ratio x context-length pages): 18 for pycode-30m); the split rule reads the width")
    ap.add_argument("--verify", default="32768:1:64,131072:1:64,65536:8:64")
    ap.add_argument("--verify-variants", default=",off,nw=8,nw=8/off,pp=2/nw=8,pp=2/nw=8/off",
                    help="comma list: '' new kernel, off = scores off, v0 = previous kernel, bf = batch-following "
                         "splits, nr=N/pps=K/pp=1|2/nw=4|8/qa=0|1|2/kf=0|1/bm=16|32|64 overrides, sl=packed|alias "
                         "(the scales' layout)")
    ap.add_argument("--check-variants", default=",nw=8,pp=2/nw=8",
                    help="verify variants (comma list, pp=/nw=/qa= parts used) that the correctness check runs")
    ap.add_argument("--heads", default="",
                    help="HQ:HKV instead of Llama-3-8B's 32:8 (e.g. 4:2 for pycode-30m), head_dim stays 128")
    ap.add_argument("--nq", type=int, default=5)
    ap.add_argument("--maxp", type=int, default=0, help="verify: page-table width (default: the context's pages)")
    ap.add_argument("--quantize", default="1,8,32")
    ap.add_argument("--eager", action="store_true")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--l2-flush", choices=FLUSH_MODES, default="read", help="bench/l2_timer.py")
    ap.add_argument("--gluon-dir", default=".work/vg", help="folder of the gm=NAME verify variants' modules")
    ap.add_argument("--alias", type=int, default=0,
                    help="timings with every page table folded onto its first N pages (alias_pages: compute bound)")
    a = ap.parse_args()
    _TIMING.update(flush=L2Flush(a.l2_flush), gluon_dir=a.gluon_dir, alias=a.alias)
    if a.heads:
        _set_heads(a.heads)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)

    cfg = lambda s: [tuple(int(x) for x in c.split(":")) for c in filter(None, s.split(","))]  # noqa: E731
    gbps = copy_gbps()
    log(f"[device] {torch.cuda.get_device_name()} copy {gbps:.0f} GB/s triton {triton.__version__} "
        f"L2 flush {a.l2_flush}")
    res = dict(device=torch.cuda.get_device_name(), copy_gbps=gbps, argv=sys.argv, timing_flush=a.l2_flush, rows=[])
    if not a.skip_check and (a.draft or a.draft_sparse):
        res["draft_check_worst_rel"] = check_draft(log, parse_variants(a.variants))
    if not a.skip_check and a.verify:
        res["verify_check_worst_rel"] = check_verify(log, a.check_variants.split(","), sorted({1, 5, a.nq}))
    res["rows"] += bench_draft(cfg(a.draft), parse_variants(a.variants), gbps, log, a.eager)
    if a.draft_sparse:
        res["rows"] += bench_draft(cfg(a.draft_sparse), parse_variants(a.variants), gbps, log, a.eager,
                                   sparse=(a.ratio, a.min_pages, 1), kcap=a.kcap)
    if a.verify:
        res["rows"] += bench_verify(cfg(a.verify), a.nq, gbps, log, a.verify_variants.split(","), a.maxp)
    if a.quantize:
        for P in (64, 128):
            res["rows"] += bench_quantize([int(x) for x in a.quantize.split(",")], P, gbps, log)
    (out / "dev_kernels.json").write_text(json.dumps(res, indent=1, default=str))
    (out / "dev_kernels.log").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
