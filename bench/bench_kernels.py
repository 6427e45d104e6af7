#!/usr/bin/env python
"""Kernel benchmark: our quantized-page attention kernels vs the best BF16 paged-attention baseline of the same run
(Llama-3-8B layer: Hq=32, Hkv=8, D=128, bf16), one printed line per (ctx, batch, page) configuration.

Per configuration (every request holds ``ctx`` tokens; the newest is at position ctx-1):
  baseline      BF16 decode over the paged BF16 cache: FA3 (sgl_kernel) and FlashInfer decode (tensor cores on/off),
                the fastest is ``baseline``; torch SDPA on a dense copy only if neither works (said so)
  draft_dense   draft_decode over all complete pages (upper plane) + the hot page
  draft_sparse  draft_decode over select_topk_pages' budget: k = min(n, max(min_pages, ceil(ratio*n))), sinks inside
  verify_nqN[_scores]  verify_attention with N = γ+1 rows (INT8 view), page scores on/off; its baseline is FA3 with
                the same N causal rows over the BF16 cache (the decode baseline is recorded too)
  select_topk_pages    one launch for all ``--layers`` layers
  quantize_pages       one launch quantizing one page per request (at ctx 32k, or the nearest ctx in the grid), and
                one graph of --layers such launches; frac_step_lb = layers * t_quantize / (layers * t_bf16_decode
                at 32k + Llama-3-8B weight bytes / copy bandwidth) (criterion: < 2%; bench/quant_criterion.py)
Timing: bench/kernel_timing.py (do_bench's procedure), median, of CUDA-graph replays of each call (``--eager``: plain
calls), for our kernels and the baselines alike, as SGLang runs decode; a 256 MB buffer is read (``--l2-flush read``,
default: clean L2 lines, as after a decode step's weight reads) or zeroed (``zero``: do_bench's own flush, whose dirty
lines every call then writes back) before every timed call, so each call starts with a cold L2 (50-60 MB), and small
configurations also alternate between 2 disjoint copies of their inputs.
GB/s counts the bytes that must move (planes and scales read, hot tokens, q/out, page ids, scores written);
bw_frac divides by a device-to-device copy measured in the same run (read + write bytes).

  python bench/bench_kernels.py --out bench/results           # full grid (GPU)
  python bench/bench_kernels.py --smoke --out /tmp/kb          # tiny, on CPU: refs + torch SDPA, every code path
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

import torch

import common
import kernel_baselines as kb
import quant_criterion as qc
from kernel_cases import (HKV, HQ, D, DTYPE, RING, SM_SCALE, bf16_pages, bytes_bf16_attention, bytes_draft,
                          bytes_quantize, bytes_select, bytes_verify, draft_args, n_pages, page_bytes, quant_pages,
                          sparse_count, verify_q_start)
from kernel_guard import GuardError, guard_attention, guard_baselines, guard_quantize, guard_select
from kernel_loading import OPS, load_kernels
from kernel_timing import FLUSH_MODES, copy_gbps, make_timer, rotate

T0 = time.time()  # process start: --time-budget-s counts from here (imports, JIT probes and guards included)
QUANT_CTX = 32768  # the criterion compares with a BF16 decode step at 32k


def parse_args(argv=None):
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctx", type=ints, help="context lengths (default 8192,32768,65536,131072,262144)")
    ap.add_argument("--batch", type=ints, help="batch sizes (default 1,8,32)")
    ap.add_argument("--page", type=ints, help="page sizes (default 64,128)")
    ap.add_argument("--kernels", type=lambda s: s.split(","), default=list(OPS), help=",".join(OPS))
    ap.add_argument("--baselines", type=lambda s: s.split(","), default=["fa3", "flashinfer"],
                    help="fa3,flashinfer (sdpa is the automatic fallback; name it to force it)")
    ap.add_argument("--nq", type=ints, default=[5, 8], help="verify rows (γ+1)")
    ap.add_argument("--ratio", type=float, default=0.07)
    ap.add_argument("--min-pages", type=int, default=1)
    ap.add_argument("--sink-pages", type=int, default=1)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--impl", choices=["ops", "triton", "ref"], default="ops",
                    help="ops: the server's dispatch, sgl_spec.kernels.<op> (Triton on CUDA, refs on CPU)")
    ap.add_argument("--mem-frac", type=float, default=0.6, help="skip configurations needing more device memory")
    ap.add_argument("--fi-timeout", type=float, default=240, help="seconds allowed for FlashInfer's JIT build")
    ap.add_argument("--eager", action="store_true", help="time plain calls instead of CUDA-graph replays")
    ap.add_argument("--draft-engine", choices=["auto", "triton", "gluon"], default="auto",
                    help="draft_decode's page programs: the Gluon one-warp-a-page kernels where they run, as the "
                         "server's --quantspec-draft-kernel auto (default), or always Triton / Gluon")
    ap.add_argument("--draft-merge-blocks", type=int, default=None, help="draft_decode merge channel blocks")
    ap.add_argument("--verify-engine", choices=["auto", "triton", "gluon"], default="auto",
                    help="verify_attention's INT8 page programs: the Gluon kernels where they run, as the server's "
                         "--quantspec-verify-kernel auto (default), or always Triton / Gluon")
    ap.add_argument("--verify-partition", choices=["server", "invariant"], default="server",
                    help="verify_attention's page partition: the server's default (batch_invariant=False: splits "
                         "follow the batch) or --enable-deterministic-inference's batch-invariant one")
    ap.add_argument("--l2-flush", choices=FLUSH_MODES, default="read",
                    help="how the L2 is made cold before each timed call (bench/kernel_timing.py): read a 256 MB buffer "
                         "(clean lines, as in a decode step) or zero it (do_bench's flush: dirty lines to write back)")
    ap.add_argument("--warmup-ms", type=float, default=25)
    ap.add_argument("--rep-ms", type=float, default=100)
    ap.add_argument("--time-budget-s", type=float, default=540,
                    help="start no new configuration after this many seconds (results so far are kept)")
    ap.add_argument("--out", default=None, help="output folder (default bench/results; --smoke: /tmp/sgl_spec_kb)")
    ap.add_argument("--smoke", action="store_true", help="tiny grid on CPU")
    a = ap.parse_args(argv)
    bad = set(a.kernels) - set(OPS)
    if bad:
        ap.error(f"unknown --kernels {sorted(bad)}; choose from {list(OPS)}")
    a.ctx = a.ctx or ([256, 640] if a.smoke else [8192, 32768, 65536, 131072, 262144])
    a.batch = a.batch or ([1, 3] if a.smoke else [1, 8, 32])
    a.page = a.page or [64, 128]
    a.out = Path(a.out or ("/tmp/sgl_spec_kb" if a.smoke else Path(__file__).parent / "results"))
    a.device = "cpu" if a.smoke or not torch.cuda.is_available() else "cuda"
    return a


# ---- setup ---------------------------------------------------------------------------------------------------------
def memory_limit(a):
    if a.device == "cuda":
        return torch.cuda.get_device_properties(0).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def copies_for(B, ctx):
    return 2 if B * ctx * HKV * D * 4 < (1 << 30) else 1  # disjoint input copies for configurations near L2 size


def bytes_needed(a, B, ctx, P, use_sdpa):
    c, npl = copies_for(B, ctx), n_pages(ctx, P)
    bf16 = c * B * npl * P * HKV * D * 4 + kb.FI_WORKSPACE_BYTES + (B * ctx * HKV * D * 4 if use_sdpa else 0)
    quant = c * B * (npl * page_bytes(P, 4) + RING * P * HKV * D * 4) + (a.layers + 1) * B * HKV * npl * 4
    return max(bf16, quant) + (768 << 20)  # + do_bench's L2-flush buffer and slack


# ---- one configuration ---------------------------------------------------------------------------------------------
def measure_baselines(a, lens, P, env, timer, gen):
    """{"decode": {name: ms}, nq: {name: ms}} on a fresh BF16 cache; everything it allocates dies on return, before
    the quantized pool of the same configuration is allocated."""
    B, dev, c = len(lens), a.device, copies_for(len(lens), lens[0])
    base = {"decode": {}}
    caches = bf16_pages(lens, P, dev, copies=c, gen=gen)
    qs = [torch.randn(B, 1, HQ, D, device=dev, dtype=DTYPE) for _ in range(c)]
    if env["fa3"]:
        fns = [kb.fa3_attention(env["fa3"], ca, 1) for ca in caches]
        base["decode"]["fa3"] = timer(rotate([lambda f=f, q=q: f(q) for f, q in zip(fns, qs)]))
    for tc in env["fi_variants"]:
        fns = [kb.flashinfer_decode(ca, tc, env["fi_ws"]) for ca in caches]
        name = "flashinfer_tc" if tc else "flashinfer"
        base["decode"][name] = timer(rotate([lambda f=f, q=q: f(q[:, 0]) for f, q in zip(fns, qs)]))
    if env["sdpa"]:
        f = kb.sdpa_attention(caches[0], 1)
        base["decode"]["sdpa_dense"] = timer(lambda: f(qs[0]))
    if "verify" in a.kernels and "verify_attention" in env["impls"]:
        for nq in a.nq:
            qv = [torch.randn(B, nq, HQ, D, device=dev, dtype=DTYPE) for _ in range(c)]
            if env["fa3"]:
                fns = [kb.fa3_attention(env["fa3"], ca, nq) for ca in caches]
                base[nq] = {"fa3": timer(rotate([lambda f=f, q=q: f(q) for f, q in zip(fns, qv)]))}
            else:
                f = kb.sdpa_attention(caches[0], nq)
                base[nq] = {"sdpa_dense": timer(lambda: f(qv[0]))}
    return base


def run_config(a, ctx, B, P, env, timer, gen):
    """Returns (rows, text of the printed line)."""
    lens, dev, c = [ctx] * B, a.device, copies_for(B, ctx)
    parts, rows, quantize_here = [], [], "quantize" in a.kernels and ctx == env["quant_ctx"]
    base = measure_baselines(a, lens, P, env, timer, gen)
    _free(dev)
    dec_name = min(base["decode"], key=base["decode"].get)
    dec_ms = base["decode"][dec_name]
    others = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in base["decode"].items() if k != dec_name)
    dec_bw = bytes_bf16_attention(lens, P, 1) / dec_ms / 1e6 / env["copy_gbps"]
    parts.append(f"base {dec_name} {dec_ms * 1e3:.1f}us {dec_bw:.0%}bw" + (f" ({others})" if others else ""))
    common = dict(ctx=ctx, batch=B, page=P, device=env["device"], decode_baseline=dec_name,
                  decode_baseline_ms=dec_ms, decode_baselines_ms=dict(base["decode"]))

    def add(kernel, ms, nbytes, bname=None, bms=None, is_speedup=True, **extra):
        gbps = nbytes / ms / 1e6
        row = dict(kernel=kernel, ms=ms, us=ms * 1e3, baseline=bname, baseline_ms=bms,
                   speedup=(bms / ms) if bms and is_speedup else None, gbps=gbps, bw_frac=gbps / env["copy_gbps"],
                   bytes=nbytes, **common, **extra)
        rows.append(row)
        spd = f" {row['speedup']:.2f}x" if row["speedup"] else ""
        parts.append(f"{kernel} {ms * 1e3:.1f}us{spd} {row['bw_frac']:.0%}bw")

    # the baselines' own rows (how close to the copy bandwidth the BF16 kernels run); not in the printed line
    for nq, by_name in base.items():
        for name, ms in by_name.items():
            n = 1 if nq == "decode" else nq
            gbps = bytes_bf16_attention(lens, P, n) / ms / 1e6
            rows.append(dict(kernel=f"bf16_{name}" + ("" if nq == "decode" else f"_nq{nq}"), ms=ms, us=ms * 1e3,
                             baseline=None, baseline_ms=None, speedup=None, gbps=gbps,
                             bw_frac=gbps / env["copy_gbps"], bytes=bytes_bf16_attention(lens, P, n), **common))

    # our kernels on a quantized pool + ring of the same geometry
    impls = env["impls"]
    qbs = quant_pages(lens, P, dev, copies=c, gen=gen)
    qs = [torch.randn(B, 1, HQ, D, device=dev, dtype=DTYPE) for _ in range(c)]
    engine = None if a.draft_engine == "triton" else a.draft_engine  # None: draft_decode's default (Triton)
    if engine == "auto":  # as the server resolves --quantspec-draft-kernel auto (ops on CPU: the reference, no engine)
        from sgl_spec.kernels.draft_decode.launch import gluon_draft_support

        engine = None if gluon_draft_support(dev, P, D, HQ // HKV) else "gluon"
    for label, sparse in (("draft_dense", None), ("draft_sparse", (a.ratio, a.min_pages, a.sink_pages))):
        if label not in a.kernels or "draft_decode" not in impls:
            continue
        calls, npages, hot_len = [], None, None
        for qb, q in zip(qbs, qs):
            ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=gen)
            out = torch.empty(B, HQ, D, device=dev, dtype=DTYPE)
            args = (q[:, 0], qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE)
            dkw = {k: v for k, v in (("engine", engine), ("merge_blocks", a.draft_merge_blocks)) if v}
            calls.append(lambda args=args, out=out, dkw=dkw: impls["draft_decode"](*args, out=out, **dkw))
            npages, hot_len = cnt.tolist(), hl.tolist()
        add(label, timer(rotate(calls)), bytes_draft(P, npages, hot_len), dec_name, dec_ms, pages_read=npages[0],
            draft_engine=engine or ("reference" if dev == "cpu" and a.impl != "triton" else "triton"))
    for nq in a.nq if "verify" in a.kernels and "verify_attention" in impls else []:
        bname, bms = next(iter(base[nq].items()))
        veng = None if a.verify_engine == "triton" else a.verify_engine
        if veng == "auto":  # as the server resolves --quantspec-verify-kernel auto: Gluon from auto_min_pairs pairs
            from sgl_spec.kernels.verify_attention.gluon_rules import auto_min_pairs, gluon_verify_support

            few = B * HKV < auto_min_pairs(HQ // HKV)
            veng = None if few or gluon_verify_support(dev, P, D, HQ // HKV, nq) else "gluon"
        vkw = {"engine": veng} if veng else {}
        if a.verify_partition == "server" and dev != "cpu":  # the reference has no partition
            vkw["batch_invariant"] = False
        for with_scores in (True, False):
            calls = []
            for qb in qbs:
                q = torch.randn(B, nq, HQ, D, device=dev, dtype=DTYPE)
                sc = torch.zeros(B, HKV, qb.page_table.shape[1], device=dev) if with_scores else None
                out = torch.empty_like(q)
                args = (q, qb.store, qb.page_table, verify_q_start(qb, nq), qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE)
                calls.append(lambda args=args, sc=sc, out=out, vkw=vkw: impls["verify_attention"](
                    *args, scores=sc, out=out, **vkw))
            ms = timer(rotate(calls))
            add(f"verify_nq{nq}" + ("_scores" if with_scores else ""), ms, bytes_verify(P, lens, nq, with_scores),
                bname, bms, nq=nq, scores=with_scores, speedup_vs_decode=dec_ms / ms,
                verify_engine=veng or ("reference" if dev == "cpu" and a.impl != "triton" else "triton"),
                verify_partition=a.verify_partition)
    if "select" in a.kernels and "select_topk_pages" in impls:
        qb, n = qbs[0], (ctx - 1) // P
        kcap = sparse_count(n, a.ratio, a.min_pages, a.sink_pages) or 1
        scores = torch.randn(a.layers, B, HKV, qb.page_table.shape[1], device=dev)
        elig = torch.full((B,), n, dtype=torch.int32, device=dev)
        ids = torch.empty(a.layers, B, kcap, dtype=torch.int32, device=dev)
        cnt = torch.empty(a.layers, B, dtype=torch.int32, device=dev)
        args = (scores, elig, qb.page_table, a.ratio, a.min_pages, a.sink_pages)
        ms = timer(lambda: impls["select_topk_pages"](*args, out_ids=ids, out_count=cnt))
        add("select_topk_pages", ms, bytes_select(a.layers, [n] * B, kcap), layers=a.layers, kcap=kcap)
        del scores
    if quantize_here and "quantize_pages" in impls:
        calls = []
        for qb in qbs:  # source: ring page 0 of each request; destination: each request's first page
            src_row = ((qb.hot_slot.long() * RING) * P).contiguous()
            src = (qb.hot_k.view(-1, HKV, D), qb.hot_v.view(-1, HKV, D))
            ids = qb.page_table[:, 0].contiguous()
            calls.append(lambda src=src, r=src_row, ids=ids, s=qb.store: impls["quantize_pages"](*src, r, ids, s))
        ms = timer(rotate(calls))
        layers_ms = timer(qc.layer_graph_call(impls["quantize_pages"], qc.layer_buffers(B, P, a.layers, dev)))
        q = qc.entry(B, P, ctx, a.layers, ms, dec_ms, dec_name, env["copy_gbps"], layers_ms)
        add("quantize_pages", ms, bytes_quantize(P, B), dec_name, dec_ms, is_speedup=False, layers=a.layers,
            pages=B, step_ms=a.layers * ms, bf16_step_ms=a.layers * dec_ms, frac_of_decode_step=q["frac"],
            amortized_frac=q["frac"] / P, **{k: q[k] for k in q if k not in ("batch", "page", "ctx", "baseline")})
        parts[-1] += (f" = {q['frac_step_lb']:.2%} of a BF16 step >= attention + weights "
                      f"({q['frac']:.2%} of its attention); {a.layers}-launch graph {layers_ms * 1e3:.1f}us")
        env["quant"].append(q)
    return rows, f"ctx={ctx:>6} B={B:>2} P={P:>3} | " + " | ".join(parts)


def _free(dev):
    gc.collect()
    if dev == "cuda":
        torch.cuda.empty_cache()


# ---- main ----------------------------------------------------------------------------------------------------------
def main(argv=None):
    a = parse_args(argv)
    log = lambda s: print(s, flush=True)  # noqa: E731
    a.out.mkdir(parents=True, exist_ok=True)
    json_path = a.out / "kernels.json"
    impls, refs = load_kernels(a, log)
    timer = make_timer(a)
    env = dict(impls=impls, quant=[], fi_variants=[], fi_ws=None, fa3=None, sdpa=False)
    env["device"] = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    fa3, fa3_desc = kb.load_fa3() if "fa3" in a.baselines else (None, "not requested")
    fi_ok, fi_desc = kb.probe_flashinfer(a.fi_timeout) if "flashinfer" in a.baselines else ({}, "not requested")
    log(f"[baselines] sgl_kernel FA3: {fa3_desc} | flashinfer: {fi_desc} {fi_ok or ''}")

    # correctness first: nothing is timed unless every kernel under test matches its reference
    factories = {}
    if fa3:
        factories.update({f"fa3_nq{nq}": (nq, lambda c, nq=nq: kb.fa3_attention(fa3, c, nq)) for nq in [1] + a.nq})
    if any(fi_ok.values()):
        env["fi_ws"] = kb.new_fi_workspace(a.device)
        for tc in [tc for tc, ok in fi_ok.items() if ok]:
            factories[f"flashinfer_tc{int(tc)}"] = (1, lambda c, tc=tc: kb.flashinfer_decode(c, tc, env["fi_ws"]))
    dropped = {}
    try:
        for P in a.page:
            failed = guard_baselines(factories, P, a.device, log)
            for name, why in failed.items():
                factories.pop(name)
                dropped[f"{name} P={P}"] = why
            if "draft_decode" in impls or "verify_attention" in impls:
                guard_attention(impls, refs, P, a.device, nqs=a.nq, log=log)
            if "quantize_pages" in impls:
                guard_quantize(impls, refs, P, a.device, log=log)
        if "select_topk_pages" in impls:
            guard_select(impls, refs, a.device, log=log)
    except GuardError as e:
        log(f"\n!!!!! CORRECTNESS GUARD FAILED: {e}\n!!!!! no numbers are recorded for a wrong kernel; fix it first")
        sys.exit(2)
    env["fa3"] = fa3 if all(f"fa3_nq{nq}" in factories for nq in [1] + a.nq) else None
    env["fi_variants"] = [tc for tc in (True, False) if f"flashinfer_tc{int(tc)}" in factories]
    env["sdpa"] = "sdpa" in a.baselines or not (env["fa3"] or env["fi_variants"])
    if env["sdpa"] and a.device == "cuda":
        log("[baselines] WARNING: no FA3/FlashInfer baseline usable: torch SDPA on a dense copy is the baseline")
    if fa3 and not env["fa3"]:
        fa3_desc += " (dropped: failed the guard)"
    if fi_ok and not env["fi_variants"]:
        fi_desc += " (dropped: failed the guard)"

    gbps = copy_gbps(a, timer)
    env["copy_gbps"] = gbps
    env["quant_ctx"] = min(a.ctx, key=lambda c: abs(c - QUANT_CTX))
    import triton

    result = dict(**common.run_meta(a.device), timing="eager" if a.eager or a.device != "cuda" else "cuda_graph_replay",
                  timing_flush=a.l2_flush if a.device == "cuda" else None,
                  torch=torch.__version__, triton=triton.__version__, flashinfer=fi_desc,
                  sgl_kernel=fa3_desc, copy_gbps=gbps, impl=a.impl,
                  shapes=dict(hq=HQ, hkv=HKV, head_dim=D, dtype=str(DTYPE)),
                  sparse=dict(ratio=a.ratio, min_pages=a.min_pages, sink_pages=a.sink_pages,
                              note="k = max(min(n, max(min_pages, ceil(ratio*n))), min(sink_pages, n)), "
                                   "sinks inside k"),
                  missing=sorted({OPS[k] for k in a.kernels} - set(impls)), baselines_dropped=dropped,
                  grid=dict(ctx=a.ctx, batch=a.batch, page=a.page, kernels=a.kernels, nq=a.nq), skipped=[], rows=[])
    log(f"[device] {env['device']} | copy {gbps:.0f} GB/s | L2 flush {a.l2_flush} | torch {torch.__version__} | "
        f"triton {triton.__version__}")
    limit = a.mem_frac * memory_limit(a)
    gen = torch.Generator().manual_seed(0)
    t_start = time.time()
    for P in a.page:
        for B in a.batch:
            for ctx in a.ctx:
                def skip(why):
                    log(f"ctx={ctx:>6} B={B:>2} P={P:>3} | SKIP: {why}")
                    result["skipped"].append(dict(ctx=ctx, batch=B, page=P, reason=why))

                if time.time() - T0 > a.time_budget_s:
                    skip(f"time budget of {a.time_budget_s:.0f} s used up")
                    continue
                need = bytes_needed(a, B, ctx, P, env["sdpa"])
                if need > limit:
                    skip(f"needs {need / 1e9:.1f} GB > {a.mem_frac:.0%} of {memory_limit(a) / 1e9:.1f} GB")
                    continue
                try:
                    rows, line = run_config(a, ctx, B, P, env, timer, gen)
                except torch.OutOfMemoryError as e:
                    skip(f"out of memory ({str(e)[:80]})")
                    continue
                finally:
                    _free(a.device)  # the configuration's tensors died with run_config's frame
                log(line)
                result["rows"] += rows
                result["quantize_criterion"] = _criterion(a, env)
                _write_json(json_path, result)
    log(f"[done] {len(result['rows'])} rows in {time.time() - t_start:.0f} s -> {json_path}")
    _write_json(json_path, result)
    for q in env["quant"]:
        log(f"[criterion] {qc.summary_line(a.layers, q)}")
    if env["quant"]:
        log(f"[criterion] formula: {_criterion(a, env)['formula']}")
        if a.device == "cpu":
            log("[criterion] (CPU run: these timings say nothing about the GPU criterion)")
    try:
        import plot_kernels

        log(f"[plot] {plot_kernels.plot(json_path, a.out / 'kernels.png')}")
    except Exception as e:  # no matplotlib on the GPU machine, say: the JSON is the result, plot it elsewhere
        log(f"[plot] skipped ({type(e).__name__}: {e}); run: python bench/plot_kernels.py {json_path}")


def _criterion(a, env):
    return dict(formula=qc.formula(a.layers, env["quant_ctx"]), threshold=0.02,
                model=dict(qc.LLAMA3_8B, weights_bytes=qc.decode_weight_bytes()), results=env["quant"])


def _write_json(path, result):
    common.write_json(path, result)


if __name__ == "__main__":
    main()
