#!/bin/bash
# session 38 B: issue 2's verify grid on an H200 with the copy-warp verify on, against same-run FA3 (kit c3..c9)
cd /tmp/whlparts && W=sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl && cat $W.part0* > /tmp/$W && cd - > /dev/null
pip install -q --no-deps --target /tmp/site /tmp/$W > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
PYTHONPATH=/tmp/site timeout ${GT:-250} python3 bench/bench_kernels.py --baselines fa3 --page 64,128 \
  --ctx 65536,131072,262144 --batch 1,8 --nq ${NQ:-5} --kernels verify --out $OUT/grid${NQ:-5} --time-budget-s ${GB:-235} \
  > $OUT/grid${NQ:-5}.log 2>&1
grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/grid${NQ:-5}.log | cut -c1-330
