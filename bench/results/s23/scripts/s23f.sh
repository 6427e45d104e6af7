#!/bin/bash
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 bench/dev_kernels.py --out $OUT/devL --draft "" --quantize "" --check-variants "gl=1,gl=1/bf" \
  --verify 65536:8:64,131072:8:64,262144:8:64,131072:1:64 --verify-variants "gm=old,gm=slim,gm=c,gm=old/off,gm=slim/off" --nq 5 2>&1 | grep "^verify\|FAIL" | cut -c1-400
grep -c "ok$" $OUT/devL/dev_kernels.log
timeout 150 python3 bench/dev_kernels.py --out $OUT/devP --draft "" --quantize "" --heads 4:2 --check-variants "gl=1/bf" \
  --verify 15360:32:64,15360:64:64,8192:64:64 --verify-variants "bf,gm=old/bf,gm=slim/bf,gm=old/bf/off,gm=slim/bf/off" --nq 13 2>&1 | grep "^verify\|FAIL" | cut -c1-400
grep -c "ok$" $OUT/devP/dev_kernels.log
