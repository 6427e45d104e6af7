#!/bin/bash
# session 42 B: back-to-back power/clock of the verify with per-lane (ls 1) and per-warp (ls 0) sums, interleaved;
# then the GPU tests of the per-lane sums (new test file)
for rep in 1 2; do for ls in 0 1; do
timeout 40 python3 .work/pc.py $ls $OUT/pc_${ls}_$rep --ctx 131072 --batch 8 --page 64 --kernels verify --seconds 4 > $OUT/pc_${ls}_$rep.log 2>&1
echo "ls=$ls rep=$rep rc=$?"; grep -v "^\[" $OUT/pc_${ls}_$rep.log | tail -2 | cut -c1-300
done; done
timeout 400 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', '--durations=3', 'tests/gpu/test_verify_lane_sums_gpu.py']))" > $OUT/tests_ls.txt 2>&1
echo "pytest ls rc=$?"; tail -8 $OUT/tests_ls.txt | cut -c1-300
