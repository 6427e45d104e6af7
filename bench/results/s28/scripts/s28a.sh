#!/bin/bash
# session 28 A: Gluon kernels at P = 128 (two 64-token sub-pages a page): GPU kernel tests, then Triton vs Gluon timing
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 330 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','--maxfail=4','-p','no:cacheprovider','tests/gpu/test_kernels_gpu.py','-k','verify or draft_decode']))" > $OUT/gpu_tests.txt 2>&1
tail -1 $OUT/gpu_tests.txt | cut -c1-300; grep -m8 "^FAILED\|Error" $OUT/gpu_tests.txt | cut -c1-300
timeout 220 python3 bench/dev_kernels.py --out $OUT/p128 --skip-check --quantize "" \
  --draft "65536:1:128,131072:1:128,262144:1:128,131072:8:128,131072:1:64" --variants "gl=0;gl=1" \
  --draft-sparse "131072:1:128,131072:8:128,131072:1:64" \
  --verify "65536:1:128,131072:1:128,262144:1:128,131072:8:128,131072:1:64" --verify-variants "bf/gl=0,bf/gl=1,bf/gl=1/off" \
  2>&1 | grep -v Warn | cut -c1-250
