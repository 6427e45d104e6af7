#!/bin/bash
# session 31 B: sgl_kernel (FA3) alone from the kit's chunks c3..c9; issue 2's cells at batch 1 and 8 with same-run FA3
cd /tmp/whlparts && W=sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl && cat $W.part0* > /tmp/$W && cd - > /dev/null
pip install -q --no-deps --target /tmp/site /tmp/$W > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name --format=csv,noheader
timeout ${GT:-420} python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 --batch ${GB:-1,8} \
  --nq 5 --kernels draft_dense,draft_sparse,verify --out $OUT/grid --time-budget-s $(( ${GT:-420} - 20 )) > $OUT/grid.log 2>&1
grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/grid.log | cut -c1-330
