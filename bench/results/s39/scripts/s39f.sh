#!/bin/bash
# session 39 F: a second draft grid and the verify nq 5 grid against same-run FA3 (the kit installed by s39e)
ls /tmp/site > /dev/null 2>&1 || { echo "no /tmp/site: machine restarted"; exit 3; }
PYTHONPATH=/tmp/site timeout 150 python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 \
  --batch 1,8 --kernels draft_dense,draft_sparse --out $OUT/dgrid2 --time-budget-s 140 > $OUT/dgrid2.log 2>&1
grep "^ctx\|done" $OUT/dgrid2.log | cut -c1-330
PYTHONPATH=/tmp/site timeout 200 python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 \
  --batch 1,8 --nq 5 --kernels verify --out $OUT/vgrid --time-budget-s 185 > $OUT/vgrid.log 2>&1
grep "^ctx\|done" $OUT/vgrid.log | cut -c1-330
