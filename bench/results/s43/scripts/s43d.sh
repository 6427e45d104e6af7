#!/bin/bash
# session 43 D: the GPU verify tests of the shipped code (HEAD 29c6373)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 540 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '-p', 'no:cacheprovider', '--durations=5', 'tests/gpu/test_verify_copy_warp_gpu.py', 'tests/gpu/test_verify_lane_sums_gpu.py', 'tests/gpu/test_verify_gpu.py']))" > $OUT/tests_d.txt 2>&1
echo "pytest rc=$?"; tail -15 $OUT/tests_d.txt | cut -c1-300
