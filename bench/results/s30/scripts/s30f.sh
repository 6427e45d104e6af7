#!/bin/bash
# session 30 F (no kit): nq 8, P 64: the launch with the ring program against the ring launch with an idle program
# more a pair in the page grid (ge=1: the grid's shape without the ring code)
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/ge
timeout 200 python3 bench/dev_kernels.py --out $OUT/ge --skip-check --quantize "" --draft "" --nq 8 \
  --verify "262144:1:64,131072:1:64" \
  --verify-variants "bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=0/ge=1,bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=0/ge=1" > $OUT/ge/log.txt 2>&1
grep -v "^\[" $OUT/ge/log.txt | tail -4
