#!/bin/bash
# session 25 F: hot-token launch order for the Gluon draft; batch 2-32 engine choice for the verify at short contexts
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 bench/dev_kernels.py --out $OUT/draft --quantize "" --verify "" --skip-check \
  --draft "65536:1:64,131072:1:64,262144:1:64,65536:8:64" --draft-sparse "131072:1:64,65536:1:64,131072:8:64" \
  --variants "gl=1,ho=last;gl=1,ho=early;gl=1,ho=last;gl=1,ho=early" 2>&1 | grep "^draft" | cut -c1-400
timeout 100 python3 bench/dev_kernels.py --out $OUT/draftP --quantize "" --verify "" --skip-check --heads 4:2 \
  --draft "15360:32:64,15360:64:64" --draft-sparse "15360:32:64,15360:64:64,8192:64:64" --min-pages 8 --kcap 18 \
  --variants "gl=1,ho=last;gl=1,ho=early;gl=1,ho=last" 2>&1 | grep "^draft" | cut -c1-400
timeout 100 python3 bench/dev_kernels.py --out $OUT/vL --draft "" --quantize "" --skip-check \
  --verify "4096:2:64,15360:2:64,4096:4:64,15360:4:64,8192:8:64" --verify-variants "bf,gl=1/bf,bf,gl=1/bf" 2>&1 | grep "verify nq" | cut -c1-400
timeout 120 python3 bench/dev_kernels.py --out $OUT/vP --draft "" --quantize "" --skip-check --heads 4:2 --nq 13 --maxp 256 \
  --verify "4096:16:64,15360:16:64,4096:32:64,8192:32:64,15360:32:64,4096:64:64,15360:64:64" \
  --verify-variants "bf,gl=1/bf,bf,gl=1/bf" 2>&1 | grep "verify nq" | cut -c1-400
