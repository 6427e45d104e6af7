#!/bin/bash
# session 30 G (no kit): 25..32 rows as 16 + 16 columns (SPLIT_ROWS_WIDE, dev) at P = 64: check, then A/B nq 8 batch 1
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/sw
timeout 100 python3 .work/chk_sw.py 2>&1 | tail -3
timeout 150 python3 bench/dev_kernels.py --out $OUT/sw --skip-check --quantize "" --draft "" --nq 8 \
  --verify "131072:1:64,262144:1:64,32768:1:64,131072:8:64" \
  --verify-variants "bf/gl=1/fr=0,bf/gl=1/fr=0/sw=1,bf/gl=1/fr=1/sw=1,bf/gl=1/fr=0,bf/gl=1/fr=0/sw=1,bf/gl=1/fr=1/sw=1" > $OUT/sw/log.txt 2>&1
grep -v "^\[" $OUT/sw/log.txt | tail -5
