#!/bin/bash
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 bench/dev_kernels.py --skip-check --quantize "" --draft "" --out $OUT/slim --verify 65536:8:64,131072:8:64,262144:8:64,131072:32:64 \
  --verify-variants "gl=1/bf,gm=noslim/bf,gl=1/bf/off,gm=noslim/bf/off,gl=1/bf,gm=noslim/bf" 2>&1 | grep "^verify" | cut -c1-400
