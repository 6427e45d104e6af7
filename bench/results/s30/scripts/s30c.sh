#!/bin/bash
# session 30 C (no kit): the ring split in the Gluon verify page launch at batch 1, nq 8 and nq 1 by context
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/ab8 $OUT/ab1
V="bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=0,bf/gl=1/fr=1"
timeout 300 python3 bench/dev_kernels.py --out $OUT/ab8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "8192:1:64,8192:1:128,32768:1:64,32768:1:128,65536:1:64,65536:1:128,131072:1:64,131072:1:128,262144:1:64,262144:1:128" \
  --verify-variants "$V" > $OUT/ab8/log.txt 2>&1
grep -v "^\[" $OUT/ab8/log.txt | tail -12
timeout 150 python3 bench/dev_kernels.py --out $OUT/ab1 --skip-check --quantize "" --draft "" --nq 1 \
  --verify "8192:1:64,32768:1:128,131072:1:64,131072:1:128" --verify-variants "$V" > $OUT/ab1/log.txt 2>&1
grep -v "^\[" $OUT/ab1/log.txt | tail -5
