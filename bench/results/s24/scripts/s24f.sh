#!/bin/bash
# session 24: the batch-following split rule without the ring programs (Gluon): new rule (bf) vs old counts (ns=)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 250 python3 bench/dev_kernels.py --skip-check --quantize "" --draft "" --out $OUT/l8 --verify 65536:8:64,131072:8:64,262144:8:64 \
  --verify-variants "gl=1/bf,gl=1/ns=7,gl=1/ns=8,gl=1/bf,gl=1/ns=7" 2>&1 | grep "^verify" | cut -c1-400
timeout 250 python3 bench/dev_kernels.py --skip-check --quantize "" --draft "" --out $OUT/l32 --verify 65536:32:64,262144:32:64 \
  --verify-variants "gl=1/bf,gl=1/ns=2,gl=1/ns=3,gl=1/ns=4,gl=1/bf,gl=1/ns=3" 2>&1 | grep "^verify" | cut -c1-400
timeout 250 python3 bench/dev_kernels.py --skip-check --quantize "" --draft "" --out $OUT/py --heads 4:2 --nq 13 --maxp 256 --verify 15360:64:64,8192:64:64,15360:128:64 \
  --verify-variants "gl=1/bf,gl=1/ns=7,gl=1/ns=3,gl=1/ns=4,gl=1/bf,gl=1/ns=7" 2>&1 | grep "^verify" | cut -c1-400
