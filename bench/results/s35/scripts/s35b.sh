#!/bin/bash
# session 35 B: the Gluon verify with the first group's copies issued before q^T's load (.work/vg/qlate.py) against the
# shipped form (checked against the reference first)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TMO:-540} python3 bench/dev_kernels.py --out $OUT/b --quantize "" --draft "" --gluon-dir .work/vg \
  --check-variants "bf/gl=1/gm=qlate" \
  --verify "8192:1:64,32768:1:64,65536:1:64,131072:1:64,65536:1:128,131072:1:128,262144:1:128,65536:8:64,131072:8:128" \
  --verify-variants "bf/gl=1,bf/gl=1/gm=qlate,bf/gl=1/off,bf/gl=1/off/gm=qlate" > $OUT/b.log 2>&1; echo "rc=$?"
cut -c1-250 $OUT/b.log
