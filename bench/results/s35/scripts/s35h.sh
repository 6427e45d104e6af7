#!/bin/bash
# session 35 H: the ring rule extended (P = 128, 17+ sub-pages a split): dense drafts at batch 1 against same-run FA3
# (sgl_kernel from the kit chunks c3..c9), and rule vs forced registers at batch 1-4
cd /tmp/whlparts && W=sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl && cat $W.part0* > /tmp/$W && cd - > /dev/null
pip install -q --no-deps --target /tmp/site /tmp/$W > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${GT:-200} python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 --batch 1 \
  --nq 5 --kernels draft_dense --out $OUT/grid --time-budget-s $(( ${GT:-200} - 20 )) > $OUT/grid.log 2>&1
grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/grid.log | cut -c1-330
timeout ${TMO:-150} python3 bench/dev_kernels.py --out $OUT/rule --quantize "" --verify "" --skip-check \
  --draft "262144:1:128,131072:2:128,131072:4:128,65536:4:128,131072:1:128,65536:1:128" \
  --variants "gl=1;gl=1,as=0" > $OUT/rule.log 2>&1; echo "rc=$?"
cut -c1-300 $OUT/rule.log
