#!/bin/bash
# session 30 B (no kit): A/B of the ring split in the Gluon verify page launch at batch 1 (fr=0 | fr=1 | fr=1 + merge
# released at each program's end), nq 5 and 8
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/ab5 $OUT/ab8
V="bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=1/rt=1,bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=1/rt=1"
timeout 300 python3 bench/dev_kernels.py --out $OUT/ab5 --skip-check --quantize "" --draft "" \
  --verify "131072:1:64,131072:1:128,65536:1:64,65536:1:128,262144:1:64,262144:1:128,32768:1:64,32768:1:128,8192:1:128" \
  --verify-variants "$V" > $OUT/ab5/log.txt 2>&1
grep -v "^\[" $OUT/ab5/log.txt | tail -20
timeout 150 python3 bench/dev_kernels.py --out $OUT/ab8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "131072:1:64,131072:1:128" --verify-variants "$V" > $OUT/ab8/log.txt 2>&1
grep -v "^\[" $OUT/ab8/log.txt | tail -5
