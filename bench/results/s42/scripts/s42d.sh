#!/bin/bash
# session 42 D: issue 2's verify grid (nq 5, scores on and off) against same-run FA3, LANE_SUMS on (the kit c3..c9
# copied by the calls before)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd /tmp/whlparts && W=sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl && cat $W.part0* > /tmp/$W && cd - > /dev/null
pip install -q --no-deps --target /tmp/site /tmp/$W > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200
PYTHONPATH=/tmp/site timeout 230 python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 \
  --batch 1,8 --nq 5 --kernels verify --out $OUT/vgrid --time-budget-s 215 > $OUT/vgrid.log 2>&1
echo "grid rc=$?"; grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/vgrid.log | cut -c1-330
