#!/bin/bash
# session 32 D (kit installed): issue 2's batch-1 cells with same-run FA3, the verify with the committed Gluon ring launch
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name --format=csv,noheader
timeout ${GT:-540} python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 --batch ${GB:-1} \
  --nq 5 --kernels draft_dense,draft_sparse,verify --out $OUT/grid --time-budget-s $(( ${GT:-540} - 20 )) > $OUT/grid.log 2>&1
grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/grid.log | cut -c1-330
