#!/bin/bash
# session 25 B: dynamic group claiming (gm=dyn) - correctness against the package kernel, then A/B/A/B timing
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 .work/chk_dyn.py 2>&1 | grep -v Warn | tail -32
timeout 250 python3 bench/dev_kernels.py --out $OUT/dyn --draft "" --quantize "" --skip-check \
  --verify "65536:8:64,131072:8:64,262144:8:64,131072:32:64,65536:32:64,131072:1:64" \
  --verify-variants "gl=1/bf,gm=dyn/bf,gl=1/bf,gm=dyn/bf" 2>&1 | grep "verify nq" | cut -c1-400
timeout 100 python3 bench/dev_kernels.py --out $OUT/dynP --draft "" --quantize "" --skip-check --heads 4:2 --nq 13 --maxp 256 \
  --verify "15360:32:64,15360:64:64,8192:64:64" \
  --verify-variants "gl=1/bf,gm=dyn/bf,gl=1/bf,gm=dyn/bf" 2>&1 | grep "verify nq" | cut -c1-400
