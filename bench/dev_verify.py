"""verify_attention in the kernel development bench (bench/dev_kernels.py --verify): the variant syntax (engine,
partition, launch knobs, gm=NAME kernel forms from --gluon-dir), the timings, and the check of each variant against
verify_attention_ref on fresh random inputs (rows bit-equal to one-row calls, unwritten scores left NaN)."""
from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import kernel_cases as kc  # noqa: E402  (kc.HQ / kc.HKV read at call time: --heads changes them)
from dev_timing import _TIMING, alias_pages, time_variant  # noqa: E402
from kernel_cases import D, DTYPE, SM_SCALE, bytes_verify, quant_pages, relayout_scales, verify_q_start  # noqa: E402


def verify_variant(var):
    """'' (new kernel), 'off' (new, scores off), 'v0' (the previous kernel, bench/verify_attention_v0.py), gm=NAME
    (the Gluon engine with --gluon-dir/NAME.py's launch_pages), or
    'nr=168/pps=3/pp=2/nw=8/qa=1/ns=8/bf' style overrides of the new kernel's register cap / programs per SM at 4
    warps (split heuristic) / pages per loop iteration / warps a program / rows as the MMA M dimension / page splits
    per request / batch-following splits (batch_invariant=False) / keys in the A fragment's order (kf=1) / the ring
    split as a Triton or a Gluon launch (fr=0|1, verify_attention(gluon_ring=)); module knobs set
    during the call: ds=0|1 (verify_gluon_rules.DIRECT_SCORES), sv=0|1 (verify_attention.SCORE_TILE_VEC), m1=N
    (verify_attention.MERGE_ONE_STEP_MAX), ro=early|serial|last (verify_attention.RING_ORDER), sw=0|1
    (verify_gluon_rules.SPLIT_ROWS_WIDE), mt=N (verify_attention.MERGE_TILE: the merge's heads a program), cw=0|1
    (verify_gluon_rules.COPY_WARP: the copy-warp form, sgl_spec/kernels/verify_attention/gluon_copy_warp.py), ls=0|1
    (verify_gluon_rules.LANE_SUMS: the page loop's running sums per lane)."""
    import verify_attention_v0 as v0
    from sgl_spec.kernels.verify_attention import triton as va

    if var == "v0":
        return v0.verify_attention, True, {}
    kw, scores, gm, knobs = {}, True, "", {}
    for part in filter(None, var.split("/")):
        if part == "off":
            scores = False
        elif part.split("=")[0] in _KNOBS:
            knobs[part.split("=")[0]] = part.split("=")[1]
        elif part.startswith("nr="):
            kw["maxnreg"] = int(part[3:]) or None
        elif part.startswith("pp="):
            kw["pages_per_iter"] = int(part[3:])
        elif part.startswith("nw="):
            kw["num_warps"] = int(part[3:])
        elif part.startswith("qa="):
            kw["rows_as_m"] = int(part[3:])
        elif part.startswith("ns="):
            kw["num_splits"] = int(part[3:])
        elif part == "bf":  # batch-following splits (the server's default; batch_invariant=False)
            kw["batch_invariant"] = False
        elif part.startswith("kf="):  # keys in the wgmma A fragment's channel / token order (P = 64, D = 128)
            kw["key_frag"] = bool(int(part[3:]))
        elif part.startswith("bm="):  # row tile (block_rows: rows of one program)
            kw["block_m"] = int(part[3:])
        elif part.startswith("gl="):  # INT8 page splits in Gluon (sgl_spec/kernels/verify_attention/gluon_pages.py)
            kw["engine"] = "gluon" if int(part[3:]) else "triton"
        elif part.startswith("fr="):  # the ring split as a Gluon launch (verify_ring_gluon) or the Triton one
            kw["gluon_ring"] = bool(int(part[3:]))
        elif part.startswith("gm="):  # another verify_pages_gluon module (file NAME.py in --gluon-dir): A/B timing
            kw["engine"] = "gluon"
            gm = part[3:]
    return _with_knobs(_with_gluon_module(gm, va.verify_attention) if gm else va.verify_attention, knobs), scores, kw


# verify variants' module knobs, set during each call (the split heuristic and the launch read them at launch)
_KNOBS = {"pps": ("verify_splits", "PROGRAMS_PER_SM"), "ds": ("verify_gluon_rules", "DIRECT_SCORES"),
          "sv": ("verify_attention", "SCORE_TILE_VEC"), "m1": ("verify_attention", "MERGE_ONE_STEP_MAX"),
          "ro": ("verify_attention", "RING_ORDER"), "sw": ("verify_gluon_rules", "SPLIT_ROWS_WIDE"),
          "mt": ("verify_attention", "MERGE_TILE"), "cw": ("verify_gluon_rules", "COPY_WARP"),
          "ls": ("verify_gluon_rules", "LANE_SUMS")}


def _with_knobs(fn, knobs):
    """``fn`` with the sgl_spec.kernels module knobs of ``knobs`` (dev keys, _KNOBS) set during each call."""
    if not knobs:
        return fn
    import importlib

    def call(*a, **k):
        saved = []
        for key, val in knobs.items():
            mod = importlib.import_module(f"sgl_spec.kernels.{_KNOBS[key][0]}")
            saved.append((mod, _KNOBS[key][1], getattr(mod, _KNOBS[key][1])))
            old = saved[-1][2]
            setattr(mod, _KNOBS[key][1], val if isinstance(old, str) else type(old)(int(val)))
        try:
            return fn(*a, **k)
        finally:
            for mod, name, old in saved:
                setattr(mod, name, old)
    return call


@functools.lru_cache(maxsize=None)
def _gluon_module(path: str):
    """The module at ``path``, loaded once (verify_variant runs for every cell and variant)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"vg_{Path(path).stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _with_gluon_module(name, verify):
    """``verify`` with verify_pages_gluon's launch_pages taken from ``<--gluon-dir>/<name>.py`` during the call (dev
    A/B of a kernel form against the package's, in one process)."""
    from sgl_spec.kernels.verify_attention import gluon_pages as vg

    mod = _gluon_module(str(Path(_TIMING.get("gluon_dir", ".work/vg")) / f"{name}.py"))

    def fn(*a, **k):
        saved, vg.launch_pages = vg.launch_pages, mod.launch_pages
        try:
            return verify(*a, **k)
        finally:
            vg.launch_pages = saved
    return fn


def bench_verify(cfgs, nq, gbps, log, variants, maxp=0):
    """``maxp``: page-table width (0: the context's pages). A server's table is as wide as its context length, which
    the batch-following split rule reads (sgl_spec/kernels/verify_attention/splits.py), so a 4k prompt in a 16k server has 256 columns."""
    rows = []
    gen = torch.Generator().manual_seed(1)
    for ctx, B, P in cfgs:
        lens = [ctx] * B
        qb = quant_pages(lens, P, "cuda", copies=1, gen=gen)[0]
        if maxp > qb.page_table.shape[1]:
            qb.page_table = torch.nn.functional.pad(qb.page_table, (0, maxp - qb.page_table.shape[1]))
        qb.page_table = alias_pages(qb.page_table)
        q = torch.randn(B, nq, kc.HQ, D, device="cuda", dtype=DTYPE)
        out = torch.empty_like(q)
        sc = torch.zeros(B, kc.HKV, qb.page_table.shape[1], device="cuda")
        qs = verify_q_start(qb, nq)
        parts = []
        for var in variants:
            sl = [p_[3:] for p_ in var.split("/") if p_.startswith("sl=")]  # the scales' layout (relayout_scales)
            st = relayout_scales(qb.store, sl[0] if sl else "split")
            impl, with_scores, kw = verify_variant("/".join(p_ for p_ in var.split("/") if not p_.startswith("sl=")))
            fn = lambda impl=impl, s=(sc if with_scores else None), kw=kw, st=st: impl(  # noqa: E731
                q, st, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE, scores=s, out=out, **kw)
            ms = time_variant(fn, var or "new", parts, log, "verify variant")
            if ms is None:
                continue
            bw = bytes_verify(P, lens, nq, with_scores) / ms / 1e6 / gbps
            rows.append(dict(kernel=f"verify_nq{nq}", variant=var or "new", scores=with_scores, ctx=ctx, batch=B,
                             maxp=qb.page_table.shape[1],
                             page=P, us=ms * 1e3, bw=bw))
            parts.append(f"{var or 'new'} {ms * 1e3:.1f}us {bw:.0%}")
        log(f"verify nq={nq} ctx={ctx:>6} B={B:>2} P={P:>3}{f' maxp={maxp}' if maxp else ''} | " + " | ".join(parts))
        qb = None  # noqa: F841 (free the pool before the next configuration)
        torch.cuda.empty_cache()
    return rows


def check_verify(log, variants=("",), nqs=(1, 5)):
    """verify_attention (asm conversion paths, GPU) vs verify_attention_ref on reference-quantized random pages, scores
    included, plus row independence: each row of an NQ=5 window bit-equal to an NQ=1 call at its position. Every
    pp=/nw=/qa= combination among ``variants`` is checked, with its gm= kernel form and module knobs (cw=1 ...)."""
    from sgl_spec.kernels.verify_attention.ref import verify_attention as ref

    cases = []
    for var in variants:
        if var != "v0":
            kw = {k: v for k, v in verify_variant(var)[2].items()
                  if k in ("pages_per_iter", "num_warps", "rows_as_m", "num_splits", "batch_invariant", "key_frag",
                           "block_m", "engine")}
            gm = next((p[3:] for p in var.split("/") if p.startswith("gm=")), "")  # a --gluon-dir kernel form
            knobs = tuple(tuple(p.split("=", 1)) for p in var.split("/") if p.split("=")[0] in _KNOBS)
            cases += [(kw, gm, knobs)] if (kw, gm, knobs) not in cases else []
    worst = 0.0
    for kw, gm, knobs in cases:
        worst = max(worst, _check_verify_one(log, ref, kw, nqs, gm, dict(knobs)))
    return worst


def _check_verify_one(log, ref, kw, nqs, gm="", knobs=None):
    from sgl_spec.kernels.verify_attention import triton as va

    fn = _with_knobs(_with_gluon_module(gm, va.verify_attention) if gm else va.verify_attention, knobs or {})

    def verify_attention(*a, **k):
        return fn(*a, **k, **kw)

    gen = torch.Generator().manual_seed(int(time.time()))
    worst = 0.0
    for P in (64, 128) if kw.get("engine") == "gluon" else (32, 64, 128):
        for lens in ([4097], [3 * P + 5, 9, 2 * P, 9 * P + 63]):
            toks = [(torch.randn(n, kc.HKV, D, generator=gen).to("cuda", DTYPE) * 2
                     + torch.randn(1, kc.HKV, D, generator=gen).to("cuda", DTYPE) * 3,
                     torch.randn(n, kc.HKV, D, generator=gen).to("cuda", DTYPE)) for n in lens]
            qb = quant_pages(lens, P, "cuda", tokens=toks, gen=gen)[0]
            for nq in nqs:
                nq_ = min(nq, min(lens))
                q = torch.randn(len(lens), nq_, kc.HQ, D, generator=gen).to("cuda", DTYPE)
                qs = verify_q_start(qb, nq_)
                args = (q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, SM_SCALE)
                out = torch.full_like(q, float("nan"))
                sc = torch.full((len(lens), kc.HKV, qb.page_table.shape[1]), float("nan"), device="cuda")
                verify_attention(*args, scores=sc, out=out)
                sc_ref = sc.clone().fill_(float("nan"))
                want = ref(*args, scores=sc_ref, out=torch.empty(q.shape, device="cuda"))
                err = ((out.float() - want).norm() / want.norm()).item()
                sc_err = (sc.nan_to_num(0) - sc_ref.nan_to_num(0)).abs().max().item()
                same_nan = torch.equal(sc.isnan(), sc_ref.isnan())
                rows_eq = True
                for i in range(nq_):
                    one = torch.empty_like(q[:, i:i + 1])
                    verify_attention(q[:, i:i + 1].contiguous(), *args[1:3], qs + i, *args[4:], out=one)
                    rows_eq &= torch.equal(one[:, 0], out[:, i])
                # information only: is a row's result the same bits with a row tile twice as wide (same partition)?
                tile_eq = "-"
                if "block_m" not in kw and kw.get("batch_invariant", True):
                    wide = torch.empty_like(out)
                    va.verify_attention(*args, out=wide, block_m=2 * va.block_rows(kc.HQ // kc.HKV), **kw)
                    tile_eq = torch.equal(wide, out)
                bad = (~torch.isfinite(out)).sum().item()
                ok = err < 1e-2 and sc_err < 5e-2 and same_nan and rows_eq and bad == 0
                worst = max(worst, err if err == err else float("inf"))
                kn = "".join(f" {k}={v}" for k, v in (knobs or {}).items())
                log(f"check verify {kw}{' gm=' + gm if gm else ''}{kn} P={P} lens={lens} nq={nq_}: rel err {err:.2e} "
                    f"score max abs err {sc_err:.1e} "
                    f"unwritten-same {same_nan} rows==nq1 {rows_eq} nonfinite {bad} wide-tile-bits-equal {tile_eq} -> "
                    f"{'ok' if ok else 'FAIL'}")
    return worst
