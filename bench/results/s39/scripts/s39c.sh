#!/bin/bash
# session 39 C: the draft ring with TMA copies: bit-equality, dev check, then stream/math diagnosis and timings
timeout 200 python3 .work/tma_check.py > $OUT/tma_check.txt 2>&1; echo "tma_check rc=$?"; tail -24 $OUT/tma_check.txt | cut -c1-250
timeout 200 python3 .work/draft_diag.py 131072:8:64,262144:8:64,131072:8:128 > $OUT/diag.log 2>&1
echo "diag rc=$?"; cut -c1-500 $OUT/diag.log | tail -4
timeout 150 python3 bench/dev_kernels.py --out $OUT/dev --quantize "" --verify "" \
  --draft "65536:8:64,131072:8:64,262144:8:64,131072:8:128,262144:8:128,262144:1:64,65536:32:64" \
  --draft-sparse "65536:32:64,131072:8:64" \
  --variants "gl=1;gl=1,tma=1;gl=1;gl=1,tma=1" > $OUT/dev.log 2>&1; echo "dev rc=$?"
grep -v "^  " $OUT/dev.log | cut -c1-300 | tail -14
