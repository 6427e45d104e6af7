#!/bin/bash
# session 36 A: the Gluon verify with the split's last group holding one whole page (tail1) or two (tail2), masked
# value MMAs skipped; nolastv = no values math in the last group (diagnostic, wrong outputs, timed only)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TMO:-540} python3 bench/dev_kernels.py --out $OUT/a --quantize "" --draft "" --gluon-dir .work/vg \
  --check-variants "bf/gl=1/gm=tail1,bf/gl=1/gm=tail2" \
  --verify "65536:1:64,131072:1:64,65536:1:128,131072:1:128,262144:1:128,65536:8:64,131072:8:128" \
  --verify-variants "bf/gl=1,bf/gl=1/gm=tail1,bf/gl=1/gm=tail2,bf/gl=1/gm=nolastv" > $OUT/a.log 2>&1; echo "rc=$?"
cut -c1-250 $OUT/a.log
