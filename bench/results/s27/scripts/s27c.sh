#!/bin/bash
# session 27 C: verify page groups claimed from counters (.work/vg/cl27.py, counters zeroed by a fill before the
# page launch) against fixed splits: correctness, then alternating timing
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 .work/s27/chk_cl.py 2>&1 | grep -v Warn | cut -c1-250 | tail -22
timeout 300 python3 bench/dev_kernels.py --out $OUT/cl --draft "" --quantize "" --skip-check \
  --verify "65536:1:64,131072:1:64,262144:1:64,32768:1:64,65536:8:64,131072:8:64" \
  --verify-variants "gl=1/bf,gm=cl27/bf,gl=1/bf,gm=cl27/bf" 2>&1 | grep "verify nq" | cut -c1-400
