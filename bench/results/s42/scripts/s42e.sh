#!/bin/bash
# session 42 E: the verify grid again (LANE_SUMS on; kit installed by s42d), then the Gluon verify GPU tests that
# reach G = 2 (pycode-30m's form: cp.async, one 32-column tile) and the ring launches with the per-lane sums on
ls /tmp/site > /dev/null 2>&1 || { echo "no /tmp/site: machine restarted"; exit 3; }
PYTHONPATH=/tmp/site timeout 100 python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 65536,131072,262144 \
  --batch 1,8 --nq 5 --kernels verify --out $OUT/vgrid2 --time-budget-s 90 > $OUT/vgrid2.log 2>&1
echo "grid rc=$?"; grep "^ctx\|done" $OUT/vgrid2.log | cut -c1-330
timeout 240 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_verify_gpu.py', '-k', 'gluon_ring_launch or long_window']))" > $OUT/tests_ring.txt 2>&1
echo "pytest rc=$?"; tail -3 $OUT/tests_ring.txt | cut -c1-300
