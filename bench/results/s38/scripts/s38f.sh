#!/bin/bash
# session 38 F: the draft ring rule as committed (P = 64: split length alone): rule vs registers, then issue 2's
# draft grid against same-run FA3
timeout 150 python3 bench/dev_kernels.py --out $OUT/rule64 --quantize "" --verify "" --skip-check \
  --draft "8192:8:64,32768:8:64,65536:8:64,131072:8:64,262144:1:64,131072:1:64,65536:32:64" \
  --draft-sparse "65536:32:64,131072:8:64,262144:8:64" \
  --variants "gl=1;gl=1,as=0;gl=1;gl=1,as=0" > $OUT/rule64.log 2>&1; echo "rc=$?"
cut -c1-300 $OUT/rule64.log | grep -v "^  " | tail -12
cd /tmp/whlparts && W=sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl && cat $W.part0* > /tmp/$W && cd - > /dev/null
pip install -q --no-deps --target /tmp/site /tmp/$W > /tmp/install.log 2>&1
PYTHONPATH=/tmp/site timeout 200 python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 \
  --batch 1,8 --kernels draft_dense,draft_sparse --out $OUT/dgrid --time-budget-s 185 > $OUT/dgrid.log 2>&1
grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/dgrid.log | cut -c1-330
