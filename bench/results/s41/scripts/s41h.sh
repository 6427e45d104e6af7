#!/bin/bash
# session 41 H: the GPU draft tests with hot_last on by the rule (defaults)
timeout 540 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', 'tests/gpu/test_draft_tma_gpu.py', '-k', 'draft or tma_ring_equals']))" > $OUT/tests_draft.txt 2>&1
echo "pytest rc=$?"; tail -3 $OUT/tests_draft.txt | cut -c1-300
