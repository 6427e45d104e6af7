#!/bin/bash
# session 31 G (no kit), H100: the ring branch's code against the page loop: a few instructions (rs_tiny), the ring
# program as a noinline function (rs_noinl), its inputs recomputed in its branch (rs_iso), and the production forms
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/g8 $OUT/g5
V="bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=1/gm=rs_tiny,bf/gl=1/fr=1/gm=rs_noinl,bf/gl=1/fr=1/gm=rs_iso"
timeout 220 python3 bench/dev_kernels.py --out $OUT/g8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "262144:1:64,131072:1:64,8192:1:64" --verify-variants "$V,$V" > $OUT/g8/log.txt 2>&1
grep -v "^\[" $OUT/g8/log.txt | tail -3
timeout 200 python3 bench/dev_kernels.py --out $OUT/g5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "131072:1:128,262144:1:128,131072:1:64" --verify-variants "$V,$V" > $OUT/g5/log.txt 2>&1
grep -v "^\[" $OUT/g5/log.txt | tail -3
