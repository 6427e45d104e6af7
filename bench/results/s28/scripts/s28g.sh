#!/bin/bash
# session 28 G: kit install, issue 2's grid at P = 128 (Gluon sub-pages) with same-run FA3, then P = 64 at 8k
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
if [ ! -f /tmp/site/sglang/__init__.py ]; then bash /tmp/whlparts/install_on_device.sh > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200; fi
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 440 python3 bench/bench_kernels.py --baselines fa3 --page 128 --ctx 8192,32768,65536,131072,262144 --batch 1,8,32 \
  --nq 5,8 --out $OUT/grid128 --time-budget-s 400 > $OUT/grid128.log 2>&1
grep "^ctx\|criterion\] quantize\|done\|budget" $OUT/grid128.log | cut -c1-330
timeout 100 python3 bench/bench_kernels.py --baselines fa3 --page 64 --ctx 8192 --batch 1,8,32 \
  --nq 5,8 --out $OUT/grid64_8k --time-budget-s 80 > $OUT/grid64_8k.log 2>&1
grep "^ctx\|done\|budget" $OUT/grid64_8k.log | cut -c1-330
