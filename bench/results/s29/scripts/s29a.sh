#!/bin/bash
# session 29 A (no kit): launch floors in the kernel bench's harness; batch-1 split counts at P = 128; draft hot config
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
mkdir -p $OUT/floor $OUT/dev
python3 bench/launch_floor.py --out $OUT/floor --repeats 5 2>&1 | tee $OUT/floor/log.txt | tail -8
timeout 420 python3 bench/dev_kernels.py --out $OUT/dev --skip-check --quantize "" \
  --draft "131072:1:64,131072:1:128,65536:8:64" --variants "gl=1;gl=1,nw=4,st=1;gl=1;gl=1,nw=4,st=1" \
  --draft-sparse "131072:1:64,131072:1:128" \
  --verify "131072:1:128,65536:1:128,131072:1:64,262144:1:128" \
  --verify-variants "bf/gl=1,bf/gl=1/ns=24,bf/gl=1/ns=40,bf/gl=1/ns=48,bf/gl=1,bf/gl=1/ns=64" > $OUT/dev/log.txt 2>&1
grep -v "^\[" $OUT/dev/log.txt | tail -20
