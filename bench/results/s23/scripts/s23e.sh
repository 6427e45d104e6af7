#!/bin/bash
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 bench/dev_kernels.py --out $OUT/devL --draft "" --quantize "" --skip-check \
  --verify 65536:8:64,131072:8:64,131072:1:64 --verify-variants "gm=old,gm=b,gm=c,gm=d,gm=e,gm=old/off,gm=c/off,gm=d/off,gm=e/off" --nq 5 2>&1 | grep "^verify" | cut -c1-400
timeout 150 python3 bench/dev_kernels.py --out $OUT/devP --draft "" --quantize "" --heads 4:2 --skip-check \
  --verify 15360:32:64,15360:64:64,8192:64:64 --verify-variants "bf,gm=old/bf,gm=b/bf,gm=c/bf,gm=d/bf,gm=e/bf,gm=old/bf/off,gm=d/bf/off,gm=e/bf/off" --nq 13 2>&1 | grep "^verify" | cut -c1-400
