#!/bin/bash
# session 30 D (no kit): GPU tests with the ring-program rule; the rule's choice against both forms
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/tests $OUT/rule
timeout 420 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'fused_ring or (test_verify_attention and 1-) or verify_gluon_ring_order']))" > $OUT/tests/gpu_tests.txt 2>&1; tail -3 $OUT/tests/gpu_tests.txt
for nq in 5 8; do
timeout 100 python3 bench/dev_kernels.py --out $OUT/rule/nq$nq --skip-check --quantize "" --draft "" --nq $nq \
  --verify "131072:1:64,32768:1:128" --verify-variants "bf/gl=1,bf/gl=1/fr=0,bf/gl=1/fr=1" > $OUT/rule/log$nq.txt 2>&1
grep -v "^\[" $OUT/rule/log$nq.txt | tail -2
done
