#!/bin/bash
# session 32 E (no kit): the verify merge's program shape at batch 1 (MERGE_TILE: heads a program; MERGE_ONE_STEP_MAX:
# one step of all 33 partials or a loop of 16)
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/m
V="bf/gl=1,bf/gl=1/mt=16384,bf/gl=1/m1=32,bf/gl=1/m1=32/mt=4096,bf/gl=1/mt=32768"
timeout 200 python3 bench/dev_kernels.py --out $OUT/m/n5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "65536:1:64,65536:1:128,131072:1:128,262144:1:128" --verify-variants "$V,$V" > $OUT/m/log5.txt 2>&1
grep -v "^\[" $OUT/m/log5.txt | tail -4
