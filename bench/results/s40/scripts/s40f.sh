#!/bin/bash
# session 40 F: the shipped kernels (HEAD): the copy-warp verify's GPU tests in full (its scale descriptors moved to
# kernels/tma_rows.py in session 39, where only 6 of them ran), then the draft tests of test_kernels_gpu
timeout 330 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_verify_copy_warp_gpu.py']))" > $OUT/tests_cw.txt 2>&1
echo "pytest cw rc=$?"; tail -3 $OUT/tests_cw.txt | cut -c1-300
timeout 230 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'draft and not 4097']))" > $OUT/tests_draft.txt 2>&1
echo "pytest draft rc=$?"; tail -3 $OUT/tests_draft.txt | cut -c1-300
