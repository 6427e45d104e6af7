#!/bin/bash
# session 26 final A: kit install, issue 2's P=64 grid with same-run FA3 (server partition, auto)
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
if [ ! -f /tmp/site/sglang/__init__.py ]; then mkdir -p /tmp/m && cp .devmodel/pycode-30m/* /tmp/m/ && bash /tmp/whlparts/install_on_device.sh > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200; fi
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python3 bench/bench_kernels.py --baselines fa3 --page 64 --ctx 32768,65536,131072,262144 --batch 1,8,32 --nq 5,8 \
  --out $OUT/grid --time-budget-s 270 > $OUT/grid.log 2>&1
grep "^ctx\|criterion\] quantize\|done" $OUT/grid.log | cut -c1-330
