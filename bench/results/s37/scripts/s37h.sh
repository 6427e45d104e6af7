#!/bin/bash
# session 37 H: the warp-specialized TMA form (gm=ws: a one-warp copy partition issues the planes and scales by TMA,
# the four compute warps at 232 registers): checks against the reference, then timings against the shipped form
timeout 110 python3 bench/dev_kernels.py --out $OUT/h --quantize "" --draft "" --gluon-dir .work/vg \
  --check-variants "bf/gl=1/gm=ws" \
  --verify "131072:1:64,131072:8:64,131072:1:128,131072:8:128,65536:1:64" \
  --verify-variants "bf/gl=1,bf/gl=1/gm=ws,bf/gl=1,bf/gl=1/gm=ws" > $OUT/h.log 2>&1; echo "rc=$?"
cut -c1-260 $OUT/h.log | grep -v "^  " | tail -22
