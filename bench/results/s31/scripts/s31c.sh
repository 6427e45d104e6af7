#!/bin/bash
# session 31 C (no kit): GPU tests of the final tree (the TRIGGER constexpr and GRID_EXTRA removed, the Triton
# stage-1 launch inline in verify_attention)
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
mkdir -p $OUT/tests
timeout ${TT:-540} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'fused_ring or verify_gluon_ring_order or (test_verify_attention and 1-)']))" > $OUT/tests/gpu_tests.txt 2>&1; tail -3 $OUT/tests/gpu_tests.txt | cut -c1-300
