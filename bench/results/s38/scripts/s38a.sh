#!/bin/bash
# session 38 A: the GPU kernel tests with the copy-warp verify on (COPY_WARP = True in the tree)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, torch, triton; print('torch', torch.__version__, 'triton', triton.__version__); from sgl_spec.kernels import verify_gluon_rules as v; print('COPY_WARP', v.COPY_WARP)"
timeout ${TMO:-540} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_verify_copy_warp_gpu.py', 'tests/gpu/test_verify_gpu.py', '-k', '${K:-copy_warp or test_verify_attention or ring_order}']))" > $OUT/tests_${N:-a}.txt 2>&1
echo "pytest rc=$?"; tail -6 $OUT/tests_${N:-a}.txt | cut -c1-300
