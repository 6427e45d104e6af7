#!/bin/bash
# session 34 A: Gluon draft page programs streaming pages through a cp.async shared-memory ring (as=N), checked and
# timed against the register prefetch (gl=1) in one process
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
V="gl=1;gl=1,as=2;gl=1,as=3;gl=1,as=2,pps=12;gl=1,as=4,pps=6"
timeout ${TMO:-500} python3 bench/dev_kernels.py --out $OUT/a --quantize "" --verify "" \
  --draft "65536:1:64,131072:1:64,262144:1:64,65536:8:64,131072:8:64,65536:1:128,131072:1:128,65536:8:128" \
  --draft-sparse "131072:1:64,131072:1:128" --variants "$V" > $OUT/a.log 2>&1; echo "rc=$?"
grep -v "^check" $OUT/a.log | cut -c1-400; grep -c "ok$" $OUT/a.log; grep "FAIL\|Error" $OUT/a.log | head
