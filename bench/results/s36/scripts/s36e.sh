#!/bin/bash
# session 36 E: the verify's values in two halves, each its own commit group (vhalf: the first half's value math while
# the second lands; a half refilled once its math is done) against the shipped form (value branches in nq 5)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TMO:-330} python3 bench/dev_kernels.py --out $OUT/e --quantize "" --draft "" --gluon-dir .work/vg \
  --check-variants "bf/gl=1/gm=vhalf" \
  --verify "65536:1:64,131072:1:64,131072:1:128,65536:1:128,65536:8:64,131072:8:128" \
  --verify-variants "bf/gl=1,bf/gl=1/gm=vhalf" > $OUT/e.log 2>&1; echo "rc=$?"
cut -c1-250 $OUT/e.log | grep -v "^check.*ok$"; grep -c "ok$" $OUT/e.log
