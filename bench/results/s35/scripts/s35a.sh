#!/bin/bash
# session 35 A: the Gluon verify with the next group's keys issued at the page-maxima barrier (.work/vg/early.py) against
# the shipped form, and the copies-only forms of both orders (vdiag: shipped order, ediag: early order; timed only)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TMO:-540} python3 bench/dev_kernels.py --out $OUT/a --quantize "" --draft "" --gluon-dir .work/vg \
  --check-variants "bf/gl=1/gm=early" \
  --verify "65536:1:64,131072:1:64,65536:1:128,131072:1:128,262144:1:128,65536:8:64,131072:8:128" \
  --verify-variants "bf/gl=1,bf/gl=1/gm=early,bf/gl=1/gm=vdiag,bf/gl=1/gm=ediag" > $OUT/a.log 2>&1; echo "rc=$?"
cut -c1-250 $OUT/a.log
