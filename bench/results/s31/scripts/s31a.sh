#!/bin/bash
# session 31 A (no kit): nq 8 P 64 at batch 1 with the ring program's branch first (verify_pages_gluon.RING_FIRST,
# rule ring_first_form) against the ring launch and the branch last; 16 + 16 columns (sw=1) too; nq 5 unchanged
# forms (the TRIGGER constexpr removed); then GPU tests of the fused ring (both placements) and the ring orders
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
mkdir -p $OUT/ab8 $OUT/ab5 $OUT/tests
V8="bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=1/rf=0,bf/gl=1/fr=0/sw=1,bf/gl=1/fr=1/sw=1"
timeout 260 python3 bench/dev_kernels.py --out $OUT/ab8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "262144:1:64,131072:1:64,32768:1:64,8192:1:64" --verify-variants "$V8,$V8" > $OUT/ab8/log.txt 2>&1
grep -v "^\[" $OUT/ab8/log.txt | tail -8
V5="bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=0,bf/gl=1/fr=1"
timeout 100 python3 bench/dev_kernels.py --out $OUT/ab5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "131072:1:64,131072:1:128,8192:1:64" --verify-variants "$V5" > $OUT/ab5/log.txt 2>&1
grep -v "^\[" $OUT/ab5/log.txt | tail -4
timeout ${TT:-200} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'fused_ring or verify_gluon_ring_order']))" > $OUT/tests/gpu_tests.txt 2>&1; tail -3 $OUT/tests/gpu_tests.txt
