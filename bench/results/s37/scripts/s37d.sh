#!/bin/bash
# session 37 D: H200, the verify page loop without memory traffic (nocopy: every cp.async masked off; diag, wrong
# outputs) against real and --alias 8 timings; nq 1 and nq 5
for nq in 5 1; do
timeout 100 python3 bench/dev_kernels.py --out $OUT/d$nq --quantize "" --draft "" --skip-check --nq $nq --gluon-dir .work/vg \
  --verify "131072:1:64,131072:8:64,131072:8:128" \
  --verify-variants "bf/gl=1,bf/gl=1/gm=nocopy,bf/gl=1/gm=noscale,bf/gl=1" > $OUT/d$nq.log 2>&1; echo "nq=$nq rc=$?"
cut -c1-250 $OUT/d$nq.log
done
