#!/bin/bash
# session 27 F: verify merge in channel blocks (verify_attention.MERGE_BLOCKS_D, dev key mb=): timing, GPU tests with mb=4
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 bench/dev_kernels.py --out $OUT/mbL --draft "" --quantize "" --skip-check \
  --verify "32768:1:64,65536:1:64,131072:1:64,262144:1:64,65536:8:64,131072:8:64,131072:32:64" \
  --verify-variants "gl=1/bf,gl=1/bf/mb=2,gl=1/bf/mb=4,gl=1/bf,gl=1/bf/mb=4" 2>&1 | grep "verify nq" | cut -c1-400
timeout 120 python3 bench/dev_kernels.py --out $OUT/mbP --draft "" --quantize "" --skip-check --heads 4:2 --nq 13 \
  --verify "15360:32:64,15360:64:64,4096:32:64,15360:1:64" \
  --verify-variants "bf,bf/mb=2,bf/mb=4,bf,bf/mb=4" 2>&1 | grep "verify nq" | cut -c1-400
timeout 200 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; from sgl_spec.kernels import verify_attention as va; va.MERGE_BLOCKS_D=4; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','verify']))" > $OUT/gpu_tests_mb4.txt 2>&1
tail -1 $OUT/gpu_tests_mb4.txt | cut -c1-300; grep -m5 "Error\|assert\|FAIL" $OUT/gpu_tests_mb4.txt | cut -c1-300
