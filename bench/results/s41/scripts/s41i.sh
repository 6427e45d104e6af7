#!/bin/bash
# session 41 I: issue 2's dense-draft batch-8 cells against same-run FA3 with GLUON_HOT_LAST (kit c3..c9 copied before)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd /tmp/whlparts && W=sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl && cat $W.part0* > /tmp/$W && cd - > /dev/null
pip install -q --no-deps --target /tmp/site /tmp/$W > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200
PYTHONPATH=/tmp/site timeout 220 python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 \
  --batch 8 --kernels draft_dense --out $OUT/dgrid --time-budget-s 200 > $OUT/dgrid.log 2>&1
echo "grid rc=$?"; grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/dgrid.log | cut -c1-330
