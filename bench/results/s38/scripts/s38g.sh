#!/bin/bash
# session 38 G: draft keys with their scales folded into q (key_q 1 / 2, dev): checks against the reference, timings
timeout 250 python3 bench/dev_kernels.py --out $OUT/kq --quantize "" --verify "" \
  --draft "65536:8:64,131072:8:64,131072:8:128,262144:1:64,131072:1:64,65536:1:128" \
  --draft-sparse "131072:1:64,131072:8:64" \
  --variants "gl=1;gl=1,kq=1;gl=1,kq=2;gl=1;gl=1,kq=2" > $OUT/kq.log 2>&1; echo "rc=$?"
grep "^check" $OUT/kq.log | sed 's/check draft //' | cut -c1-150
cut -c1-300 $OUT/kq.log | grep "^draft" | tail -10
