#!/bin/bash
# session 32 A (no kit): GPU tests of the committed Gluon ring launch (fbf67fb..519d801), then batch-1 verify timings
# Triton ring launch (fr=0) against the Gluon ring launch (fr=1, the rule's default at batch 1)
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/tests $OUT/t
timeout ${TT:-430} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'ring_launch or verify_gluon_ring_order or (test_verify_attention and 1-)']))" > $OUT/tests/gpu_tests_ring.txt 2>&1; tail -2 $OUT/tests/gpu_tests_ring.txt | cut -c1-300
V="bf/gl=1/fr=0,bf/gl=1/fr=1"
timeout 100 python3 bench/dev_kernels.py --out $OUT/t/n5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "65536:1:64,65536:1:128,131072:1:64,131072:1:128,262144:1:64,262144:1:128" --verify-variants "$V,$V" > $OUT/t/log5.txt 2>&1
grep -v "^\[" $OUT/t/log5.txt | tail -6
