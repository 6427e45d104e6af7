#!/bin/bash
# session 27 H: claimed verify page groups in the package (claims=): GPU verify tests, then timing with / without
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','verify']))" > $OUT/gpu_tests_verify.txt 2>&1
tail -1 $OUT/gpu_tests_verify.txt | cut -c1-300; grep -m5 "Error\|assert\|FAIL" $OUT/gpu_tests_verify.txt | cut -c1-300
timeout 150 python3 .work/s27/chk_clr.py 2>&1 | grep -v Warn | tail -1
timeout 200 python3 bench/dev_kernels.py --out $OUT/L --draft "" --quantize "" --skip-check \
  --verify "32768:1:64,65536:1:64,131072:1:64,262144:1:64,65536:8:64,131072:8:64,131072:32:64" \
  --verify-variants "gl=1/bf,gl=1/bf/cl=1,gl=1/bf,gl=1/bf/cl=1" 2>&1 | grep "verify nq" | cut -c1-400
timeout 100 python3 bench/dev_kernels.py --out $OUT/L8 --draft "" --quantize "" --skip-check --nq 8 \
  --verify "131072:1:64,131072:8:64" --verify-variants "gl=1/bf,gl=1/bf/cl=1,gl=1/bf/off,gl=1/bf/off/cl=1" 2>&1 | grep "verify nq" | cut -c1-400
timeout 100 python3 bench/dev_kernels.py --out $OUT/N1 --draft "" --quantize "" --skip-check --nq 1 \
  --verify "131072:1:64,32768:8:64" --verify-variants "gl=1/bf/off,gl=1/bf/off/cl=1" 2>&1 | grep "verify nq" | cut -c1-400
