#!/bin/bash
# session 36 F: bench/dev_kernels.py after its split into dev_timing / dev_verify / dev_kernels: draft and verify checks,
# a draft, a verify (with a gm= form) and a quantize timing, and --heads 4:2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 bench/dev_kernels.py --out $OUT/f --quantize "1" --draft "65536:1:128" --variants "gl=1" \
  --verify "65536:1:64" --verify-variants "bf/gl=1,bf/gl=1/gm=vbr,bf/gl=1/off" --check-variants "bf/gl=1" \
  > $OUT/f.log 2>&1; echo "rc=$?"
timeout 60 python3 bench/dev_kernels.py --out $OUT/g --quantize "" --draft "" --skip-check --heads 4:2 --nq 13 \
  --verify "15360:32:64" --verify-variants "bf/gl=1" > $OUT/g.log 2>&1; echo "rc=$?"
cut -c1-200 $OUT/f.log | grep -v "ok$"; grep -c "ok$" $OUT/f.log; grep -c FAIL $OUT/f.log; cut -c1-200 $OUT/g.log
