#!/bin/bash
# session 26 D: GPU verify tests on the split rule / merge change, draft order and split A/B, nq 1 engine check
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 .work/s26/ab26e.py 32768:1:d,65536:1:ds,131072:1:ds,262144:1:ds,131072:8:ds 2>&1 | grep -v Warn | cut -c1-300
timeout 100 python3 bench/dev_kernels.py --out $OUT/nq1 --draft "" --quantize "" --skip-check --nq 1 \
  --verify "4096:1:64,32768:1:64,131072:1:64,32768:8:64" --verify-variants "bf,gl=1/bf,bf,gl=1/bf" 2>&1 | grep "verify nq" | cut -c1-300
timeout 240 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','verify']))" > $OUT/gpu_tests.txt 2>&1
tail -1 $OUT/gpu_tests.txt | cut -c1-300; grep -m3 "Error\|assert" $OUT/gpu_tests.txt | cut -c1-300
