#!/bin/bash
# session 32 H (no kit): GPU tests after the Gluon ring launch became the rule at every batch (not batch-invariant);
# then the default (rule) against the Triton ring launch at batch 4 / 8
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/tests $OUT/rule
timeout ${TT:-400} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'test_verify_attention or verify_gluon_ring_order or (ring_launch and 17-)']))" > $OUT/tests/gpu_tests_rule.txt 2>&1; tail -2 $OUT/tests/gpu_tests_rule.txt | cut -c1-300
V="bf/gl=1,bf/gl=1/fr=0"
timeout 60 python3 bench/dev_kernels.py --out $OUT/rule/n5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "4096:4:64,8192:8:64,131072:1:128" --verify-variants "$V,$V" > $OUT/rule/log5.txt 2>&1
grep -v "^\[" $OUT/rule/log5.txt | tail -3
