#!/bin/bash
# session 24: keys of the next group issued at the page-maxima barrier (gm=kearly) and 8 splits at B = 8, A/B/A
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python3 bench/dev_kernels.py --skip-check --quantize "" --draft "" --out $OUT/kearly --verify 65536:8:64,131072:8:64,262144:8:64,131072:32:64,131072:1:64 \
  --verify-variants "gl=1/bf,gm=kearly/bf,gl=1/ns=8,gm=kearly/ns=8,gl=1/bf,gm=kearly/bf" 2>&1 | grep "^verify" | cut -c1-400
