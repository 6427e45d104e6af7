#!/bin/bash
# session 26 A: batch-1 timelines (verify Gluon rule / 32 / 31 splits / Triton, drafts), B=1 verify engine crossover
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 .work/s26/prof26.py > $OUT/prof26.txt 2>&1; grep -v Warn $OUT/prof26.txt | cut -c1-600
timeout 240 python3 bench/dev_kernels.py --out $OUT/xover --draft "" --quantize "" --skip-check \
  --verify "8192:1:64,16384:1:64,24576:1:64,32768:1:64,49152:1:64,65536:1:64,131072:1:64,262144:1:64,16384:2:64,32768:2:64" \
  --verify-variants "bf,gl=1/bf,gl=1/bf/ns=32,bf,gl=1/bf/ns=32" 2>&1 | grep "verify nq" | cut -c1-400
