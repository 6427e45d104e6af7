#!/bin/bash
# session 35 C: page ids of the next group loaded at the loop top (ptpre; ptearly: with the keys issued at the
# page-maxima barrier) against the shipped form; copies-only forms vdiag / pdiag (timed only)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TMO:-540} python3 bench/dev_kernels.py --out $OUT/c --quantize "" --draft "" --gluon-dir .work/vg \
  --check-variants "bf/gl=1/gm=ptpre,bf/gl=1/gm=ptearly" \
  --verify "8192:1:64,32768:1:64,65536:1:64,131072:1:64,65536:1:128,131072:1:128,262144:1:128,65536:8:64,131072:8:128" \
  --verify-variants "bf/gl=1,bf/gl=1/gm=ptpre,bf/gl=1/gm=ptearly,bf/gl=1/gm=vdiag,bf/gl=1/gm=pdiag" > $OUT/c.log 2>&1; echo "rc=$?"
cut -c1-250 $OUT/c.log
