#!/bin/bash
# session 41 J: the draft grid again, batch 1 and 8, dense and 7% (same machine after s41i.sh)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "(sglang_kernel installed by s41i.sh)"

PYTHONPATH=/tmp/site timeout 220 python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 \
  --batch 1,8 --kernels draft_dense,draft_sparse --out $OUT/dgrid2 --time-budget-s 200 > $OUT/dgrid2.log 2>&1
echo "grid rc=$?"; grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/dgrid2.log | cut -c1-330
