#!/bin/bash
# session 26 C: GPU kernel tests on the by-length verify, B=1 engine sweep with it, G=2 sweep, draft merge-early A/B
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 260 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','verify or (draft_decode and 64)']))" > $OUT/gpu_tests.txt 2>&1
tail -1 $OUT/gpu_tests.txt | cut -c1-300; grep -m3 "Error\|assert" $OUT/gpu_tests.txt | cut -c1-300
timeout 120 python3 bench/dev_kernels.py --out $OUT/b1 --draft "" --quantize "" --check-variants "gf=24576/bf,gf=1/bf" \
  --verify "4096:1:64,8192:1:64,16384:1:64,24576:1:64,32768:1:64,65536:1:64,131072:1:64,262144:1:64" \
  --verify-variants "bf,gl=1/bf,gf=24576/bf,gf=1/bf" 2>&1 | grep "verify nq\|check" | cut -c1-300
timeout 90 python3 bench/dev_kernels.py --out $OUT/g2 --draft "" --quantize "" --skip-check --heads 4:2 --nq 13 \
  --verify "16384:1:64,32768:1:64,65536:1:64,16384:4:64,32768:4:64,16384:8:64,32768:8:64" \
  --verify-variants "bf,gf=1/bf,gl=1/bf" 2>&1 | grep "verify nq" | cut -c1-300
timeout 100 python3 .work/s26/ab26d.py 32768:1,65536:1,131072:1,262144:1,131072:8 2>&1 | grep -v Warn | cut -c1-300
