#!/bin/bash
# session 37 C: H200 compute floor (--alias 8: every page table folded onto its first 8 pages, L2-resident) against
# the real timing, verify nq 5 (scores on/off) and dense drafts
for al in 0 8; do
timeout 150 python3 bench/dev_kernels.py --out $OUT/c$al --quantize "" --skip-check --alias $al \
  --draft "131072:1:64,131072:8:64,131072:8:128" --variants "" \
  --verify "131072:1:64,131072:8:64,131072:8:128" \
  --verify-variants "bf/gl=1,bf/gl=1/off" > $OUT/c$al.log 2>&1; echo "alias=$al rc=$?"
grep -v "^\[\|check" $OUT/c$al.log | cut -c1-250
done
