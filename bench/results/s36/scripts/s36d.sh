#!/bin/bash
# session 36 D: the value-page branches in the package (verify_gluon_rules.value_branches): the verify grid against
# same-run FA3 (sgl_kernel from the kit chunks c3..c9), then the GPU verify tests
cd /tmp/whlparts && W=sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl && cat $W.part0* > /tmp/$W && cd - > /dev/null
pip install -q --no-deps --target /tmp/site /tmp/$W > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PYTHONPATH=/tmp/site timeout ${GT:-260} python3 bench/bench_kernels.py --baselines fa3 --page 64,128 \
  --ctx 65536,131072,262144 --batch 1,8 --nq 5 --kernels verify --out $OUT/grid --time-budget-s $(( ${GT:-260} - 20 )) \
  > $OUT/grid.log 2>&1
grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/grid.log | cut -c1-330
timeout ${TT:-250} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'verify']))" > $OUT/tests.txt 2>&1; echo "pytest rc=$?"
tail -3 $OUT/tests.txt | cut -c1-300
