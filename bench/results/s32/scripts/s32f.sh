#!/bin/bash
# session 32 F (no kit): the Gluon ring launch beyond batch 1 (fr=1 forced) against the rule's Triton ring launch (fr=0)
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/gb
V="bf/gl=1/fr=0,bf/gl=1/fr=1"
timeout 150 python3 bench/dev_kernels.py --out $OUT/gb/n5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "8192:2:64,8192:8:64,32768:2:128,32768:4:64,131072:2:128,131072:8:64,131072:8:128,8192:32:64" --verify-variants "$V,$V" > $OUT/gb/log5.txt 2>&1
grep -v "^\[" $OUT/gb/log5.txt | tail -8
timeout 100 python3 bench/dev_kernels.py --out $OUT/gb/n8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "8192:2:64,8192:8:64,131072:2:64,131072:8:64" --verify-variants "$V,$V" > $OUT/gb/log8.txt 2>&1
grep -v "^\[" $OUT/gb/log8.txt | tail -4
