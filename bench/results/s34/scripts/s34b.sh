#!/bin/bash
# session 34 B: the cp.async ring forms (as=2 / 3 slots, +10: 16-byte value copies) checked, then timed beside the
# register prefetch; as=2x: stream-only diagnostic (no attention math, outputs wrong on purpose: timed, not checked)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 bench/dev_kernels.py --out $OUT/chk --quantize "" --verify "" --draft "8192:1:64" \
  --variants "gl=1,as=12,pps=12;gl=1,as=13" > $OUT/chk.log 2>&1; echo "check rc=$? ok=$(grep -c 'ok$' $OUT/chk.log) fail=$(grep -c FAIL $OUT/chk.log)"
V="gl=1;gl=1,as=2,pps=12;gl=1,as=12,pps=12;gl=1,as=13;gl=1,as=22,pps=12;gl=1,as=23"
timeout ${TMO:-380} python3 bench/dev_kernels.py --out $OUT/b --quantize "" --verify "" --skip-check \
  --draft "65536:8:64,65536:8:128,131072:8:64,131072:8:128,262144:8:128,32768:32:64,131072:32:128,65536:1:64,131072:1:128,262144:1:64" \
  --variants "$V" > $OUT/b.log 2>&1; echo "rc=$?"
cut -c1-420 $OUT/b.log
