#!/bin/bash
# session 24: verify partitions with the split kernel: batch-invariant (bench default) vs batch-following (server), split counts
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 280 python3 bench/dev_kernels.py --skip-check --quantize "" --draft "" --out $OUT/part --verify 65536:8:64,131072:8:64,65536:32:64,131072:1:64,65536:1:64 \
  --verify-variants "gl=1,gl=1/bf,gl=1/ns=4,gl=1/ns=8,gl=1/ns=16,gl=0,gl=0/bf" 2>&1 | grep "^verify" | cut -c1-400
