#!/bin/bash
# session 31 E (no kit): the PDL trigger at the page launch's start: ring program binary with it (rs_trig), the ring
# launch form without it (nt)
mkdir -p $OUT/pd8 $OUT/pd5
V="bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=1/gm=rs_trig,bf/gl=1/fr=0/gm=nt"
timeout 170 python3 bench/dev_kernels.py --out $OUT/pd8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "262144:1:64,131072:1:64,8192:1:64" --verify-variants "$V,$V" > $OUT/pd8/log.txt 2>&1
grep -v "^\[" $OUT/pd8/log.txt | tail -3
timeout 150 python3 bench/dev_kernels.py --out $OUT/pd5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "131072:1:128,131072:1:64" --verify-variants "$V,$V" > $OUT/pd5/log.txt 2>&1
grep -v "^\[" $OUT/pd5/log.txt | tail -2
