#!/bin/bash
# session 38 D: power/clock of the copy-warp verify (on by the tree's rule) against FA3; split-count sweep (pps knob)
PYTHONPATH=/tmp/site timeout 120 python3 bench/power_clock.py --ctx 131072 --batch 8 --page 64 \
  --kernels verify,verify_zero,fa3 --out $OUT/power > $OUT/power.log 2>&1; echo "rc=$?"; tail -5 $OUT/power.log | cut -c1-300
timeout 200 python3 bench/dev_kernels.py --out $OUT/pps --quantize "" --draft "" --skip-check \
  --verify "65536:1:64,131072:1:64,131072:1:128,65536:8:64,131072:8:64" \
  --verify-variants "bf/gl=1,bf/gl=1/pps=1,bf/gl=1/pps=3,bf/gl=1/pps=4,bf/gl=1,bf/gl=1/cw=0" > $OUT/pps.log 2>&1; echo "rc=$?"
cut -c1-260 $OUT/pps.log | grep -v "^  " | tail -30
