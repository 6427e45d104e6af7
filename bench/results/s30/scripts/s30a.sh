#!/bin/bash
# session 30 A (no kit): GPU tests of the ring split in the Gluon verify page launch; A/B fused_ring at batch 1
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/tests $OUT/ab
timeout ${TMO:-300} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', '${K:-fused_ring or verify_gluon_ring_order}']))" > $OUT/tests/gpu_tests.txt 2>&1; tail -3 $OUT/tests/gpu_tests.txt
timeout ${TMO2:-240} python3 bench/dev_kernels.py --out $OUT/ab --skip-check --quantize "" --draft "" \
  --verify "131072:1:64,131072:1:128,65536:1:64,65536:1:128,262144:1:64,262144:1:128,8192:1:64" \
  --verify-variants "bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=1/off,bf/gl=1/fr=0/off" > $OUT/ab/log.txt 2>&1
grep -v "^\[" $OUT/ab/log.txt | tail -50
