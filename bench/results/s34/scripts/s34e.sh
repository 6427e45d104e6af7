#!/bin/bash
# session 34 E: the Gluon verify at batch 1 against a copies-only form of its page programs (.work/vg/vdiag.py: cp.async,
# waits and barriers, no scores / softmax / values; outputs wrong on purpose, timed only), same launch structure
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TMO:-300} python3 bench/dev_kernels.py --out $OUT/e --quantize "" --draft "" --skip-check --gluon-dir .work/vg \
  --verify "65536:1:64,131072:1:64,65536:1:128,131072:1:128,262144:1:128,65536:8:64" \
  --verify-variants "bf/gl=1,bf/gl=1/off,bf/gl=1/gm=vdiag" > $OUT/e.log 2>&1; echo "rc=$?"
cut -c1-300 $OUT/e.log
