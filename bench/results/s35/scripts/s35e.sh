#!/bin/bash
# session 35 E: math-only form of the Gluon verify page programs (.work/vg/mdiag.py: the first group copied, then every
# group computed on the same buffers, no waits; timed only) beside the shipped form and the copies-only form
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TMO:-300} python3 bench/dev_kernels.py --out $OUT/e --quantize "" --draft "" --skip-check --gluon-dir .work/vg \
  --verify "8192:1:64,32768:1:64,65536:1:64,131072:1:64,65536:1:128,131072:1:128,65536:8:64,131072:8:128" \
  --verify-variants "bf/gl=1,bf/gl=1/gm=vdiag,bf/gl=1/gm=mdiag" > $OUT/e.log 2>&1; echo "rc=$?"
cut -c1-250 $OUT/e.log
