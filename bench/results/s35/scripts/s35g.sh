#!/bin/bash
# session 35 G: the cp.async ring for dense drafts at batch 1-4, with the split rule counting the programs an SM really
# holds (ring + fused hot programs: 186 registers -> 11; pps=11) or the hot programs in their own launch (fh=0)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TMO:-400} python3 bench/dev_kernels.py --out $OUT/g --quantize "" --verify "" --skip-check \
  --draft "131072:1:128,65536:1:128,262144:1:128,131072:1:64,65536:1:64,262144:1:64,131072:2:128,131072:4:128" \
  --variants "gl=1;gl=1,as=2;gl=1,as=2,pps=11;gl=1,as=2,fh=0;gl=1,as=2,pps=11,fh=0;gl=1,as=2,pps=10" > $OUT/g.log 2>&1; echo "rc=$?"
cut -c1-330 $OUT/g.log
