#!/usr/bin/env python
"""One kernel launch for Nsight Compute (GPU, dev tool): builds a case with bench/kernel_cases and calls the launcher
twice (compile, then the launch to profile; profile it with ``--launch-skip 1 --launch-count 1``).

    python bench/ncu_case.py verify|draft|sparse HQ:HKV CTX B [NQ] [launcher_kw=value ...]

    S="--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
       --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters"
    ncu --clock-control none -k regex:_verify_attention_kernel --launch-skip 1 --launch-count 1 $S -o $OUT/vl -f \
        python3 bench/ncu_case.py verify 32:8 131072 1 5
    ncu --import $OUT/vl.ncu-rep --page details > $OUT/vl.txt
    ncu --import $OUT/vl.ncu-rep --page source --csv --print-source sass > $OUT/vl.sass.csv   # bench/ncu_stalls.py
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernel_cases as kc  # noqa: E402


def main():
    kind, heads, ctx, B = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    nq = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    kw = {}
    for a in sys.argv[6:]:
        k, v = a.split("=")
        kw[k] = {"True": True, "False": False}.get(v, int(v) if v.lstrip("-").isdigit() else v)
    kc.HQ, kc.HKV = (int(x) for x in heads.split(":"))
    gen = torch.Generator().manual_seed(1)
    qb = kc.quant_pages([ctx] * B, 64, "cuda", copies=1, gen=gen)[0]
    if kind == "verify":
        from sgl_spec.kernels.verify_attention.triton import verify_attention
        q = torch.randn(B, nq, kc.HQ, kc.D, device="cuda", dtype=kc.DTYPE)
        sc = torch.zeros(B, kc.HKV, qb.page_table.shape[1], device="cuda")
        qs = kc.verify_q_start(qb, nq)

        def fn():
            verify_attention(q, qb.store, qb.page_table, qs, qb.hot_k, qb.hot_v, qb.hot_slot, kc.SM_SCALE, scores=sc,
                             **kw)
    else:  # draft: every page; sparse: select_topk_pages-sized lists (7%, 1 sink page)
        from sgl_spec.kernels.draft_decode.triton import draft_decode
        q = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=kc.DTYPE)
        ids, cnt, hs, hl = kc.draft_args(qb, sparse=(0.07, 1, 1) if kind == "sparse" else None, gen=gen)

        def fn():
            draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, kc.SM_SCALE, **kw)
    for _ in range(2):
        fn()
        torch.cuda.synchronize()
    print("done", kind, heads, ctx, B, nq, kw)


if __name__ == "__main__":
    main()
