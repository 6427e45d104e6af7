#!/bin/bash
# session 23: A/B of Gluon verify forms: old (HEAD), b (RAW store from mx after the values), c (b + row tensors recomputed)
nvidia-smi --query-gpu=name --format=csv,noheader
V="gm=old,gm=b,gm=c,gm=old/off,gm=b/off,gm=c/off"
for f in read zero; do
timeout 150 python3 bench/dev_kernels.py --out $OUT/devL_$f --l2-flush $f --draft "" --quantize "" --skip-check \
  --verify 65536:1:64,131072:1:64,65536:8:64,131072:8:64,262144:8:64 --verify-variants "$V" --nq 5 2>&1 | grep "^verify" | cut -c1-300
timeout 100 python3 bench/dev_kernels.py --out $OUT/devP_$f --l2-flush $f --draft "" --quantize "" --heads 4:2 --skip-check \
  --verify 15360:32:64,15360:64:64,8192:64:64 --verify-variants "bf,gm=old/bf,gm=b/bf,gm=c/bf,gm=old/bf/off,gm=b/bf/off,gm=c/bf/off" --nq 13 2>&1 | grep "^verify" | cut -c1-300
done
