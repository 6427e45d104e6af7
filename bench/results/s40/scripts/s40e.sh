#!/bin/bash
# session 40 E: GLUON_KEY_Q = 2 by default: the GPU draft tests (outlier channels, test_draft_decode at 4097, the TMA
# file's bit-equality), then issue 2's draft grid against same-run FA3 (kit c3..c9 copied by the calls before)
timeout 260 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', 'tests/gpu/test_draft_tma_gpu.py', '-k', 'outlier or (test_draft_decode and 4097) or tma_ring_equals']))" > $OUT/tests.txt 2>&1
echo "pytest rc=$?"; tail -3 $OUT/tests.txt | cut -c1-300
cd /tmp/whlparts && W=sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl && cat $W.part0* > /tmp/$W && cd - > /dev/null
pip install -q --no-deps --target /tmp/site /tmp/$W > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200
PYTHONPATH=/tmp/site timeout 200 python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 \
  --batch 1,8 --kernels draft_dense,draft_sparse --out $OUT/dgrid --time-budget-s 185 > $OUT/dgrid.log 2>&1
grep "^ctx\|done\|budget\|baselines\]\|device\]" $OUT/dgrid.log | cut -c1-330
