#!/bin/bash
# session 25 D: ring launch order x claimed groups, correctness then A/B
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 python3 .work/chk_order.py 2>&1 | grep -v Warn | grep "FAIL\|ALL\|SOME" | head -20
V="gl=1/bf/dg=0/ro=early,gl=1/bf/dg=0/ro=serial,gl=1/bf/dg=0/ro=last,gl=1/bf/dg=1/ro=early,gl=1/bf/dg=1/ro=serial,gl=1/bf/dg=1/ro=last,gl=1/bf/dg=0/ro=early"
timeout 220 python3 bench/dev_kernels.py --out $OUT/L --draft "" --quantize "" --skip-check \
  --verify "65536:8:64,131072:8:64,262144:8:64,131072:32:64,65536:32:64" --verify-variants "$V" 2>&1 | grep "verify nq" | cut -c1-600
timeout 120 python3 bench/dev_kernels.py --out $OUT/B1 --draft "" --quantize "" --skip-check \
  --verify "32768:1:64,65536:1:64,131072:1:64,262144:1:64" --verify-variants "bf,$V" 2>&1 | grep "verify nq" | cut -c1-600
timeout 120 python3 bench/dev_kernels.py --out $OUT/P --draft "" --quantize "" --skip-check --heads 4:2 --nq 13 --maxp 256 \
  --verify "15360:32:64,15360:64:64,8192:64:64,8192:32:64" --verify-variants "$V" 2>&1 | grep "verify nq" | cut -c1-600
