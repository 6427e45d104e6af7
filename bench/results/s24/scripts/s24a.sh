#!/bin/bash
# session 24 probe 1: compute-bound floors (--alias), sparse/dense B=1 draft split sweeps, verify B=1 split sweeps
nvidia-smi --query-gpu=name --format=csv,noheader
D="python3 bench/dev_kernels.py --skip-check --quantize ''"
V="gl=1,gl=1/off,gl=0,gl=0/off"
for al in 0 8; do
  timeout 200 python3 bench/dev_kernels.py --skip-check --quantize "" --out $OUT/alias$al --alias $al \
    --draft 65536:1:64,131072:1:64,131072:8:64 --variants "gl=1" \
    --verify 131072:1:64,65536:8:64,131072:8:64 --verify-variants "$V" 2>&1 | grep -v "^\s*$" | grep "^draft\|^verify\|^\[dev\|Error" | sed "s/^/al$al /" | cut -c1-260
done
timeout 150 python3 bench/dev_kernels.py --skip-check --quantize "" --out $OUT/sparse --verify "" --draft "" \
  --draft-sparse 131072:1:64,65536:1:64 --variants "gl=1;gl=1,ns=12;gl=1,ns=18;gl=1,ns=24;gl=1,ns=36;gl=1,ns=48;gl=1,ns=72;gl=1,ns=143;gl=0;gl=0,ns=24;gl=0,ns=48" 2>&1 | grep "^draft\|Error" | cut -c1-400
timeout 150 python3 bench/dev_kernels.py --skip-check --quantize "" --out $OUT/dense --verify "" \
  --draft 65536:1:64,131072:1:64 --variants "gl=1;gl=1,ns=64;gl=1,ns=96;gl=1,ns=192;gl=1,ns=256;gl=1,md=8;gl=1,md=2" 2>&1 | grep "^draft\|Error" | cut -c1-400
timeout 200 python3 bench/dev_kernels.py --skip-check --quantize "" --out $OUT/vsplit --draft "" \
  --verify 65536:1:64,131072:1:64 --verify-variants "gl=0,gl=0/ns=16,gl=0/ns=24,gl=0/ns=48,gl=0/ns=66,gl=1,gl=1/ns=16,gl=1/ns=24,gl=1/ns=48,gl=1/ns=66" 2>&1 | grep "^verify\|Error" | cut -c1-500
