#!/bin/bash
# session 33: Gluon dense drafts at batch 8 by split count (the rule's 32 at 64k / 128k x 8), twice
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for r in 1 2; do
python3 bench/dev_kernels.py --skip-check --quantize "" --verify "" --draft "65536:8:64,65536:8:128,131072:8:128" \
  --variants "gl=1,ns=16;gl=1,ns=24;gl=1,ns=48;gl=1,ns=64;gl=1" --out $OUT/r$r > $OUT/log$r.txt 2>&1; echo "rc=$?"
grep -i "draft" $OUT/log$r.txt | grep -v "^check" | cut -c1-160 | tail -20
done
