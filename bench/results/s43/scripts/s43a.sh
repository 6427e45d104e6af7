#!/bin/bash
# session 43 A: the keys' scales and code offset folded into q (KEY_FOLD 1) and its bias-free diagnostic (2, wrong
# scores) against the shipped verify (0): checks, same-process timings, back-to-back power; the kit c3..c9 copied before
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
timeout 200 python3 bench/dev_kernels.py --out $OUT/kf --quantize "" --draft "" --check-variants "bf/gl=1/kq=1" \
  --verify "65536:1:64,131072:1:64,65536:8:64,131072:8:64,131072:8:128" \
  --verify-variants "bf/gl=1/kq=0,bf/gl=1/kq=1,bf/gl=1/kq=2,bf/gl=1/kq=0,bf/gl=1/kq=1,bf/gl=1/kq=2" > $OUT/kf.log 2>&1
echo "kf rc=$?"; grep -v "^\[" $OUT/kf.log | grep -v "^check" | cut -c1-300; grep -c "ok$" $OUT/kf.log; grep -i "fail\|check" $OUT/kf.log | head -12 | cut -c1-300
for kf in 0 1 2; do
timeout 40 python3 .work/pck.py $kf $OUT/pc_$kf --ctx 131072 --batch 8 --page 64 --kernels verify --seconds 4 > $OUT/pc_$kf.log 2>&1
echo "kf=$kf rc=$?"; grep -v "^\[" $OUT/pc_$kf.log | tail -2 | cut -c1-300
done
