#!/bin/bash
# session 25 A: GPU verify tests, then A/B of direct scores / vectorized merge score tiles / one-step merge
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 240 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','verify']))" > $OUT/gpu_tests.txt 2>&1
tail -1 $OUT/gpu_tests.txt | cut -c1-300
timeout 200 python3 bench/dev_kernels.py --out $OUT/abL --draft "" --quantize "" \
  --verify "65536:8:64,131072:8:64,262144:8:64,131072:32:64" \
  --verify-variants "gl=1/bf,gl=1/bf/ds=0,gl=1/bf/ds=0/sv=0,gl=1/bf/off,gl=1/bf" --check-variants "gl=1,gl=1/bf" 2>&1 | grep -v Warn | cut -c1-400
timeout 100 python3 bench/dev_kernels.py --out $OUT/ab1 --draft "" --quantize "" --skip-check \
  --verify "32768:1:64,65536:1:64,131072:1:64,262144:1:64" \
  --verify-variants "bf,bf/m1=0,gl=1/bf,gl=1/bf/m1=0,bf" 2>&1 | grep "verify nq" | cut -c1-400
timeout 100 python3 bench/dev_kernels.py --out $OUT/abP --draft "" --quantize "" --skip-check --heads 4:2 --nq 13 --maxp 256 \
  --verify "15360:32:64,15360:64:64,8192:64:64" \
  --verify-variants "gl=1/bf,gl=1/bf/ds=0,gl=1/bf/ds=0/sv=0,gl=1/bf" 2>&1 | grep "verify nq" | cut -c1-400
timeout 60 python3 .work/prof_m.py 131072:8,65536:8 gluon 2>&1 | grep "scores="
