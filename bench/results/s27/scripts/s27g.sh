#!/bin/bash
# session 27 G: verify claims with the counters reset by the pair's last program (.work/vg/clr27.py, no fill kernel);
# ring order / split count variants at batch 1
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 .work/s27/chk_clr.py 2>&1 | grep -v Warn | cut -c1-250 | tail -21
timeout 200 python3 bench/dev_kernels.py --out $OUT/b1 --draft "" --quantize "" --skip-check \
  --verify "65536:1:64,131072:1:64,262144:1:64,32768:1:64" \
  --verify-variants "gl=1/bf,gm=clr27/bf,gm=clr27/bf/ro=early/ns=33,gm=clr27/bf/ro=serial/ns=33,gl=1/bf,gm=clr27/bf,gm=clr27/bf/ro=early/ns=33" 2>&1 | grep "verify nq" | cut -c1-500
timeout 200 python3 bench/dev_kernels.py --out $OUT/b8 --draft "" --quantize "" --skip-check \
  --verify "65536:8:64,131072:8:64,131072:32:64" \
  --verify-variants "gl=1/bf,gm=clr27/bf,gm=clr27/bf/ro=early,gl=1/bf,gm=clr27/bf" 2>&1 | grep "verify nq" | cut -c1-500
timeout 100 python3 bench/dev_kernels.py --out $OUT/py --draft "" --quantize "" --skip-check --heads 4:2 --nq 13 \
  --verify "15360:32:64,15360:64:64" --verify-variants "gl=1/bf,gm=clr27/bf,gl=1/bf,gm=clr27/bf" 2>&1 | grep "verify nq" | cut -c1-500
