#!/bin/bash
# session 43 B: issue 2's full kernel grid on the shipped code (KEY_FOLD 0) against same-run FA3 -> kernels.json
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
cd /tmp/whlparts && W=sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl && cat $W.part0* > /tmp/$W && cd - > /dev/null
pip install -q --no-deps --target /tmp/site /tmp/$W > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200
PYTHONPATH=/tmp/site timeout 330 python3 bench/bench_kernels.py --baselines fa3 --out $OUT/grid --time-budget-s 310 \
  > $OUT/grid.log 2>&1
echo "grid rc=$?"; grep "^ctx\|done\|budget\|baselines\]\|device\]\|criterion\] quantize" $OUT/grid.log | cut -c1-420
