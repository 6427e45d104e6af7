#!/bin/bash
# session 39 B: the ring-form dense draft without its math / without its copies; power and clock of draft and verify
timeout 300 python3 .work/draft_diag.py 131072:8:64,262144:8:64,131072:8:128,131072:1:64 > $OUT/diag.log 2>&1
echo "diag rc=$?"; cut -c1-400 $OUT/diag.log | tail -8
timeout 200 python3 bench/power_clock.py --ctx 131072 --batch 8 --page 64 --kernels draft,verify,copy --out $OUT/power \
  > $OUT/power.log 2>&1; echo "power rc=$?"; tail -6 $OUT/power.log | cut -c1-300
