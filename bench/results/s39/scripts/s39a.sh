#!/bin/bash
# session 39 A: the scales' layout (split / packed / alias) — bit-equality, then same-process timings
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 .work/scale_check.py > $OUT/scale_check.txt 2>&1; echo "check rc=$?"; tail -20 $OUT/scale_check.txt | cut -c1-300
timeout 420 python3 bench/dev_kernels.py --out $OUT/dev --skip-check --quantize "" \
  --draft "131072:8:64,131072:8:128,262144:8:64,65536:8:64,131072:1:64" \
  --variants "gl=1;gl=1,sl=packed;gl=1,sl=alias;gl=1;gl=1,sl=packed" \
  --verify "131072:8:64,131072:8:128,65536:8:64,131072:1:64" \
  --verify-variants "bf/gl=1,bf/gl=1/sl=packed,bf/gl=1/sl=alias,bf/gl=1,bf/gl=1/sl=packed,bf/gl=1/cw=0,bf/gl=1/cw=0/sl=packed" \
  > $OUT/dev.log 2>&1; echo "dev rc=$?"; grep -E "^draft|^verify" $OUT/dev.log | cut -c1-400; tail -3 $OUT/dev.log | cut -c1-300
