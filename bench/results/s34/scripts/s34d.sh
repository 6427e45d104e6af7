#!/bin/bash
# session 34 D: sgl_kernel (FA3) from the kit chunks c3..c9; issue 2 cells at batch 1 and 8 with same-run FA3 (the ring rule in place); the last draft GPU test
cd /tmp/whlparts && W=sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl && cat $W.part0* > /tmp/$W && cd - > /dev/null
pip install -q --no-deps --target /tmp/site /tmp/$W > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name --format=csv,noheader
timeout ${GT:-420} python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 --batch ${GB:-1,8} \
  --nq 5 --kernels draft_dense,draft_sparse,verify --out $OUT/grid --time-budget-s $(( ${GT:-420} - 20 )) > $OUT/grid.log 2>&1
grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/grid.log | cut -c1-330
timeout 120 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'draft_gluon_hot_programs_write_the_new_token and 17-4097']))" > $OUT/tests_rest.txt 2>&1; echo "pytest rc=$?"; tail -2 $OUT/tests_rest.txt | cut -c1-200
