#!/bin/bash
# session 35 F: dense drafts at batch 1 with the cp.async ring (2 / 3 / 4 slots, programs an SM) against the register
# form the rule runs there (80% of copy at 128k x 1 needs ~61.2 µs; the stream-only 3-slot ring took 60.7 in session 34)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TMO:-400} python3 bench/dev_kernels.py --out $OUT/f --quantize "" --verify "" --skip-check \
  --draft "131072:1:128,131072:1:64,65536:1:128,65536:1:64,262144:1:128" \
  --variants "gl=1;gl=1,as=2;gl=1,as=3;gl=1,as=4;gl=1,as=2,pps=8;gl=1,as=3,pps=6" > $OUT/f.log 2>&1; echo "rc=$?"
cut -c1-300 $OUT/f.log
