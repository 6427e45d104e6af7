#!/bin/bash
# session 30 E (no kit): the ring program as a separate branch at P = 64 with one 32-column tile (RING_SEP): A/B nq 8
# by context (ring launch / ring program), then GPU tests of the ring program
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/ab8 $OUT/tests
timeout 150 python3 bench/dev_kernels.py --out $OUT/ab8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "8192:1:64,32768:1:64,65536:1:64,131072:1:64,262144:1:64" \
  --verify-variants "bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=0,bf/gl=1/fr=1" > $OUT/ab8/log.txt 2>&1
grep -v "^\[" $OUT/ab8/log.txt | tail -6
timeout 330 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'fused_ring']))" > $OUT/tests/gpu_tests.txt 2>&1; tail -3 $OUT/tests/gpu_tests.txt
