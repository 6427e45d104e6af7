#!/bin/bash
# session 36 B: value-MMA skips (vbr: pages past the split; vskip: outside it, with its masks) at the shipped
# alignment, against the shipped form and tail2 (run 1: P = 128 2-3 us faster)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TMO:-540} python3 bench/dev_kernels.py --out $OUT/b --quantize "" --draft "" --gluon-dir .work/vg \
  --check-variants "bf/gl=1/gm=vbr,bf/gl=1/gm=vskip" \
  --verify "65536:1:64,131072:1:64,65536:1:128,131072:1:128,262144:1:128,65536:8:64,131072:8:128" \
  --verify-variants "bf/gl=1,bf/gl=1/gm=vbr,bf/gl=1/gm=vskip,bf/gl=1/gm=tail2" > $OUT/b.log 2>&1; echo "rc=$?"
cut -c1-250 $OUT/b.log
