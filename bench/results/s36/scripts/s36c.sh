#!/bin/bash
# session 36 C: the value-MMA branches (package, "bf/gl=1") against the session-35 kernel (gm=base0) on the other forms:
# nq 5 and 8 with scores on and off (Llama-3-8B), nq 13 (pycode-30m shapes, 4:2 heads)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
V="bf/gl=1,bf/gl=1/gm=base0,bf/gl=1/off,bf/gl=1/gm=base0/off"
timeout 200 python3 bench/dev_kernels.py --out $OUT/c8 --quantize "" --draft "" --skip-check --gluon-dir .work/vg --nq 8 \
  --verify "65536:1:64,131072:1:128,131072:8:64,65536:8:128,131072:32:64" --verify-variants "$V" > $OUT/c8.log 2>&1
timeout 150 python3 bench/dev_kernels.py --out $OUT/c5 --quantize "" --draft "" --skip-check --gluon-dir .work/vg --nq 5 \
  --verify "65536:1:64,131072:1:128,131072:8:64,131072:32:64" --verify-variants "$V" > $OUT/c5.log 2>&1
timeout 150 python3 bench/dev_kernels.py --out $OUT/cp --quantize "" --draft "" --skip-check --gluon-dir .work/vg --nq 13 \
  --heads 4:2 --verify "15360:32:64,15360:64:64,15360:32:128,65536:8:64,4096:64:64" --verify-variants "$V" > $OUT/cp.log 2>&1
grep -h "^verify\|device\]\|Error\|error" $OUT/c8.log $OUT/c5.log $OUT/cp.log | cut -c1-250
