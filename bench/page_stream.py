#!/usr/bin/env python
"""How fast can a Triton program stream verify_attention's INT8 pages at all? (GPU, dev tool)

The verify kernel reads, per (page, KV head), four nibble planes as int32 word tiles [P, D/8] plus key and value
scales/zeros, through the page table, in the splits of its partition. This kernel reads exactly those bytes in the
same pattern (grid (Hkv, NS, B), one contiguous page range a program, the same `_load_page`) and then does
progressively more of the page work, so the time of each stage is the difference of two variants
(bench/NOTES_kernels.md, "where the verify kernel's time goes"):

* ``load``: load and fold the words into one xor (no conversion, no MMA);
* ``conv``: + the INT8 view's fp16 conversion of keys (with their scales) and values (sgl_spec/kernels/common/int8_words.py),
  folded into an fp32 sum;
* the real kernel (``verify_attention``) adds the two dots, the softmax and the value dots.

Loads as the kernel issues them: ``pf=1`` the next page into registers (the kernel's scheme, num_stages=1), ``pf=0``
a plain loop under Triton's pipeliner (num_stages ``st``).

    python bench/page_stream.py --cells 131072:1,65536:8 --heads 32:8 --splits 33,66
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).parent))
import kernel_cases as kc  # noqa: E402
from sgl_spec.kernels.common.int8_words import keys_i8, prep_key_scales, values_i8  # noqa: E402
from sgl_spec.kernels.verify_attention.triton_pages import _load_page  # noqa: E402


@triton.jit
def _page_work(acc, ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz, CONV: tl.constexpr):
    if CONV:
        s16_lo, zz_lo = prep_key_scales(ks_lo, kz_lo, True)
        s16_hi, zz_hi = prep_key_scales(ks_hi, kz_hi, True)
        k_lo, k_hi = keys_i8(ku, kl, s16_lo, zz_lo, s16_hi, zz_hi, True)
        v_lo, v_hi = values_i8(vu, vl, True)
        x = (k_lo + k_hi).to(tl.float32) + (v_lo + v_hi).to(tl.float32) * vs.to(tl.float32)[:, None]
        return acc + tl.sum(tl.sum(x, 1), 0) + tl.sum(vz.to(tl.float32), 0)
    else:
        x = ku ^ kl ^ vu ^ vl
        y = tl.xor_sum(tl.xor_sum(x, 1), 0) ^ tl.xor_sum(ks_lo ^ ks_hi ^ kz_lo ^ kz_hi, 0)
        return acc + tl.sum(y, 0).to(tl.float32) + tl.sum((vs + vz).to(tl.float32), 0)


@triton.jit
def _page_stream_kernel(KU, KL, VU, VL, KS, KZ, VS, VZ, PT, NP, OUT, C, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, spt_b,
                        P: tl.constexpr, DH: tl.constexpr, PF: tl.constexpr, CONV: tl.constexpr,
                        ST: tl.constexpr = 1):
    h = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    n_pages = tl.load(NP + b)
    j0 = split * C
    j1 = tl.minimum(j0 + C, n_pages)
    n = tl.arange(0, P)
    offs_w = tl.arange(0, DH // 4)
    w_ok = offs_w < DH // 4
    pt_row = PT + b * spt_b
    acc = 0.0
    if PF:
        cur = _load_page(KU, KL, VU, VL, KS, KZ, VS, VZ, tl.load(pt_row + j0, mask=j0 < j1, other=0), j0 < j1, h,
                         s_wp, s_wh, s_sp, s_sh, s_vp, s_vh, n, offs_w, w_ok, DH // 4)
        pg_next = tl.load(pt_row + j0 + 1, mask=j0 + 1 < j1, other=0)
        for j in tl.range(j0, j1, num_stages=1):
            nxt = _load_page(KU, KL, VU, VL, KS, KZ, VS, VZ, pg_next, j + 1 < j1, h, s_wp, s_wh, s_sp, s_sh, s_vp,
                             s_vh, n, offs_w, w_ok, DH // 4)
            pg_next = tl.load(pt_row + j + 2, mask=j + 2 < j1, other=0)
            ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz = cur
            acc = _page_work(acc, ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz, CONV)
            cur = nxt
    else:
        for j in tl.range(j0, j1, num_stages=ST):
            ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz = _load_page(
                KU, KL, VU, VL, KS, KZ, VS, VZ, tl.load(pt_row + j), j < j1, h, s_wp, s_wh, s_sp, s_sh, s_vp, s_vh,
                n, offs_w, w_ok, DH // 4)
            acc = _page_work(acc, ku, kl, vu, vl, ks_lo, ks_hi, kz_lo, kz_hi, vs, vz, CONV)
    tl.store(OUT + (b * tl.num_programs(1) + split) * tl.num_programs(0) + h, acc)


def stream(qb, n_pages, max_pages, ns, pf=1, st=1, conv=False, maxnreg=None):
    st_ = qb.store
    words = [t.view(torch.int32) for t in (st_.k_upper, st_.k_lower, st_.v_upper, st_.v_lower)]
    ks32, kz32 = st_.k_scale.view(torch.int32), st_.k_zero.view(torch.int32)
    B, hkv = n_pages.shape[0], words[0].shape[1]
    C = triton.cdiv(max_pages, ns)  # a host int: no sync under graph capture
    out = torch.empty(B * ns * hkv, device=n_pages.device)
    _page_stream_kernel[(hkv, ns, B)](
        words[0], words[1], words[2], words[3], ks32, kz32, st_.v_scale, st_.v_zero, qb.page_table, n_pages, out, C,
        words[0].stride(0), words[0].stride(1), ks32.stride(0), ks32.stride(1), st_.v_scale.stride(0),
        st_.v_scale.stride(1), qb.page_table.stride(0), P=qb.P, DH=words[0].shape[3] * 4, PF=pf, CONV=conv, ST=st,
        num_warps=4, num_stages=st, **({"maxnreg": maxnreg} if maxnreg else {}))
    return out


def main():
    from dev_kernels import copy_gbps, timer
    from kernel_cases import bytes_verify

    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", default="131072:1,65536:8")
    ap.add_argument("--heads", default="32:8")
    ap.add_argument("--splits", default="", help="comma list of split counts (default: 1, 2 and 4 waves)")
    ap.add_argument("--variants", default="pf=1,pf=0/st=2,pf=0/st=3,pf=1/conv,pf=0/st=3/conv")
    a = ap.parse_args()
    kc.HQ, kc.HKV = (int(x) for x in a.heads.split(":"))
    gbps = copy_gbps()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"[device] {torch.cuda.get_device_name()} copy {gbps:.0f} GB/s triton {triton.__version__}", flush=True)
    for cell in a.cells.split(","):
        ctx, B = (int(x) for x in cell.split(":"))
        qb = kc.quant_pages([ctx] * B, 64, "cuda", copies=1, gen=torch.Generator().manual_seed(0))[0]
        n_pages = ((qb.lens - 1) // qb.P).to(torch.int32)
        max_pages = (ctx - 1) // qb.P
        nbytes = bytes_verify(qb.P, [ctx] * B, 1, False)
        splits = [int(s) for s in a.splits.split(",")] if a.splits else \
            sorted({max(1, w * 2 * sms // (B * kc.HKV)) for w in (1, 2, 4)})
        for ns in splits:
            parts = []
            for var in a.variants.split(","):
                kw = dict(pf=1, st=1, conv=False)
                for p in var.split("/"):
                    if p == "conv":
                        kw["conv"] = True
                    elif p.startswith(("pf=", "st=", "nr=")):
                        kw[{"pf": "pf", "st": "st", "nr": "maxnreg"}[p[:2]]] = int(p[3:])
                ms = timer(lambda kw=kw: stream(qb, n_pages, max_pages, ns, **kw))
                parts.append(f"{var} {ms * 1e3:.1f}us {nbytes / ms / 1e6 / gbps:.0%}")
            print(f"stream ctx={ctx} B={B} H={a.heads} splits={ns} | " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
