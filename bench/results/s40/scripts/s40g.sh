#!/bin/bash
# session 40 G: the shipped kernels (HEAD): test_kernels_gpu's draft tests at 4097 tokens (the ring forms)
timeout 250 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'draft and 4097']))" > $OUT/tests_draft4097.txt 2>&1
echo "pytest rc=$?"; tail -3 $OUT/tests_draft4097.txt | cut -c1-300
