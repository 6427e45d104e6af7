#!/bin/bash
# session 27 A: claimed draft pages vs fixed strided splits; nq 8 scores on/off at 256k x 32 alone
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 240 python3 .work/s26/ab26f.py 65536:1,131072:1,262144:1,32768:1,65536:8,131072:8,16384:32 2>&1 | grep -v Warn | cut -c1-300
timeout 200 python3 bench/dev_kernels.py --out $OUT/nq8 --draft "" --quantize "" --skip-check --nq 8 \
  --verify "262144:32:64" --verify-variants "gl=1/bf,gl=1/bf/off,gl=1/bf/off,gl=1/bf" 2>&1 | grep "verify nq" | cut -c1-400
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
