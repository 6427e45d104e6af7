#!/bin/bash
# session 31 D (no kit): is the ring program's cost at long contexts its work or its code? The same binary (a copy
# of verify_pages_gluon with a runtime flag, .work/vg/rs_*.py) with the ring program's work done / skipped
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/rs8 $OUT/rs5
V="bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=1/gm=rs_work,bf/gl=1/fr=1/gm=rs_skip"
timeout 170 python3 bench/dev_kernels.py --out $OUT/rs8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "262144:1:64,131072:1:64" --verify-variants "$V,$V" > $OUT/rs8/log.txt 2>&1
grep -v "^\[" $OUT/rs8/log.txt | tail -3
timeout 150 python3 bench/dev_kernels.py --out $OUT/rs5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "131072:1:128,262144:1:128,32768:1:128" --verify-variants "$V,$V" > $OUT/rs5/log.txt 2>&1
grep -v "^\[" $OUT/rs5/log.txt | tail -4
