#!/bin/bash
# session 43 C: the GPU kernel tests of the shipped code (HEAD 29c6373): kernels + drafts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 560 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '-p', 'no:cacheprovider', '--durations=5', 'tests/gpu/test_kernels_gpu.py', 'tests/gpu/test_draft_tma_gpu.py', 'tests/gpu/test_draft_hot_last_gpu.py']))" > $OUT/tests_c.txt 2>&1
echo "pytest rc=$?"; tail -15 $OUT/tests_c.txt | cut -c1-300
