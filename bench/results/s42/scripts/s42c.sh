#!/bin/bash
# session 42 C: per-lane sums with the lanes reduced before the warps (final form): A/B, power, GPU tests
timeout 200 python3 bench/dev_kernels.py --out $OUT/ab2 --quantize "" --draft "" --skip-check \
  --verify "65536:1:64,131072:1:64,262144:1:64,131072:1:128,65536:8:64,131072:8:128" \
  --verify-variants "bf/gl=1/ls=0,bf/gl=1/ls=1,bf/gl=1/ls=0,bf/gl=1/ls=1,bf/gl=1/ls=0,bf/gl=1/ls=1" > $OUT/ab2.log 2>&1
echo "ab2 rc=$?"; grep -v "^\[" $OUT/ab2.log | cut -c1-330
for ls in 0 1; do for c in "131072 8" "131072 1"; do set -- $c
timeout 40 python3 .work/pc.py $ls $OUT/pc_${ls}_$1_$2 --ctx $1 --batch $2 --page 64 --kernels verify --seconds 4 > $OUT/pc_${ls}_$1_$2.log 2>&1
echo "ls=$ls rc=$?"; grep "us/replay" $OUT/pc_${ls}_$1_$2.log | cut -c1-300
done; done
timeout 300 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_verify_lane_sums_gpu.py']))" > $OUT/tests_ls.txt 2>&1
echo "pytest ls rc=$?"; tail -3 $OUT/tests_ls.txt | cut -c1-300
