#!/bin/bash
# session 23 call B: issue 2's grid with same-run FA3, L2 flushed by a read (new default) and by zeroing (do_bench's)
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
for f in ${FLUSHES:-read zero}; do
  timeout ${TG:-270} python3 bench/bench_kernels.py --baselines fa3 --page ${PAGES:-64,128} --l2-flush $f \
    --ctx ${CTX:-8192,32768,65536,131072,262144} --batch 1,8,32 --nq 5,8 --out $OUT/grid_$f --time-budget-s ${TB:-250} > $OUT/grid_$f.log 2>&1
  grep "^ctx\|PASS\|FAIL\|done" $OUT/grid_$f.log | grep -v "P=128" | cut -c1-420 | head -${HN:-20}
done
