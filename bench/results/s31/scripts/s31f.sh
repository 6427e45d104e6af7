#!/bin/bash
# session 31 F (no kit): a ring branch of a few instructions (rs_tiny) against the ring program's code (rs_skip: the
# same code, its work skipped at run time) and the two production forms
mkdir -p $OUT/tiny
V="bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=1/gm=rs_tiny,bf/gl=1/fr=1/gm=rs_skip"
timeout 200 python3 bench/dev_kernels.py --out $OUT/tiny --skip-check --quantize "" --draft "" --nq 8 \
  --verify "262144:1:64,131072:1:64,8192:1:64" --verify-variants "$V,$V" > $OUT/tiny/log.txt 2>&1
grep -v "^\[" $OUT/tiny/log.txt | tail -3
