#!/bin/bash
# session 37 A: cost of the scale reads at batch 1 (noscale / nokscale: diag, wrong outputs) and of random page order
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for seq in 0 1; do
SEQ=$seq timeout 200 python3 .work/seqpt.py --out $OUT/a$seq --quantize "" --draft "" --gluon-dir .work/vg --skip-check \
  --verify "65536:1:64,131072:1:64,65536:1:128,131072:1:128,131072:8:64" \
  --verify-variants "bf/gl=1,bf/gl=1/gm=noscale,bf/gl=1/gm=nokscale,bf/gl=1" > $OUT/a$seq.log 2>&1; echo "rc=$?"
echo "SEQ=$seq"; cut -c1-250 $OUT/a$seq.log
done
