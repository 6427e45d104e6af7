#!/bin/bash
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
for r in 1 2; do
timeout 100 python3 bench/dev_kernels.py --out $OUT/dev_pycode$r --draft "" --quantize "" --heads 4:2 --skip-check \
  --verify 15360:32:64,15360:64:64,8192:64:64,4096:32:64 --verify-variants "bf,gl=1/bf,gm=old/bf,gl=1/bf/off,gm=old/bf/off" --nq 13 2>&1 | tail -4 | cut -c1-300
done
