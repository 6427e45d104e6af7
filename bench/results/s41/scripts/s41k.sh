#!/bin/bash
# session 41 K: the batch-8 dense grid with GLUON_HOT_LAST off, then on, same machine (sglang_kernel from s41i.sh)
for v in False True; do
sed -i "s/^GLUON_HOT_LAST = .*/GLUON_HOT_LAST = $v/" kernels/draft_launch.py; grep "^GLUON_HOT_LAST" kernels/draft_launch.py
PYTHONPATH=/tmp/site timeout 120 python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 \
  --batch 8 --kernels draft_dense --out $OUT/dgrid_hl$v --time-budget-s 110 > $OUT/dgrid_hl$v.log 2>&1
echo "grid rc=$?"; grep "^ctx\|done\|budget" $OUT/dgrid_hl$v.log | cut -c1-200
done
