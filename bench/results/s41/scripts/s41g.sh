#!/bin/bash
# session 41 G: hot-token launch after the page launch (hot_last): its GPU test, then A/B timings with the keyword
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_draft_hot_last_gpu.py']))" > $OUT/tests_hl.txt 2>&1
echo "pytest rc=$?"; tail -3 $OUT/tests_hl.txt | cut -c1-300
timeout 250 python3 .work/hl_ab.py 32768:8:64,65536:8:64,131072:8:64,262144:8:64,65536:8:128,131072:8:128,262144:1:64,262144:1:128,65536:32:64 > $OUT/hl_ab.log 2>&1
echo "ab rc=$?"; grep -v Warn $OUT/hl_ab.log | cut -c1-300
