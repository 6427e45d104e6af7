#!/bin/bash
# session 32 G (no kit): the Gluon ring launch (fr=1) against the Triton ring launch (fr=0) beyond batch 1, wider cells
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/gw
V="bf/gl=1/fr=0,bf/gl=1/fr=1"
timeout 150 python3 bench/dev_kernels.py --out $OUT/gw/n5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "32768:8:64,65536:8:128,262144:8:64,8192:64:64,32768:32:64,4096:4:64,16384:16:128" --verify-variants "$V,$V" > $OUT/gw/log5.txt 2>&1
grep -v "^\[" $OUT/gw/log5.txt | tail -7
timeout 120 python3 bench/dev_kernels.py --out $OUT/gw/n8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "32768:8:64,131072:8:64,8192:32:64,65536:4:64" --verify-variants "$V,$V,$V" > $OUT/gw/log8.txt 2>&1
grep -v "^\[" $OUT/gw/log8.txt | tail -4
timeout 120 python3 bench/dev_kernels.py --out $OUT/gw/py --skip-check --quantize "" --draft "" --nq 13 --heads 4:2 \
  --verify "4096:32:64,15360:32:64,15360:64:64,4096:128:64,15360:16:128" --verify-variants "$V,$V" > $OUT/gw/logpy.txt 2>&1
grep -v "^\[" $OUT/gw/logpy.txt | tail -5
