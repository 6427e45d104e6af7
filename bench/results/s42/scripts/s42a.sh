#!/bin/bash
# session 42 A: the verify's running sums per lane (LANE_SUMS) against per warp, same process, interleaved; checks
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
timeout 330 python3 bench/dev_kernels.py --out $OUT/ab --quantize "" --draft "" --check-variants "bf/gl=1/ls=1,bf/gl=1/ls=0" \
  --verify "65536:1:64,131072:1:64,262144:1:64,65536:8:64,131072:8:64,262144:8:64,65536:8:128,131072:8:128,131072:1:128" \
  --verify-variants "bf/gl=1/ls=0,bf/gl=1/ls=1,bf/gl=1/ls=0,bf/gl=1/ls=1" > $OUT/ab.log 2>&1
echo "ab rc=$?"; grep -v "^\[" $OUT/ab.log | grep -v "^check" | cut -c1-300; grep -c "ok$" $OUT/ab.log; grep FAIL $OUT/ab.log | head -5
timeout 240 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_draft_hot_last_gpu.py', 'tests/gpu/test_kernels_gpu.py', '-k', 'hot_last or draft_gluon_hot_programs']))" > $OUT/tests_hl.txt 2>&1
echo "pytest hl rc=$?"; tail -3 $OUT/tests_hl.txt | cut -c1-300
