#!/bin/bash
# session 39 G: the copy-warp verify's GPU tests with its descriptors from kernels/tma_rows.py, and the TMA ring's tests
timeout 330 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_draft_tma_gpu.py', 'tests/gpu/test_verify_copy_warp_gpu.py', '-k', 'tma or 4097']))" > $OUT/tests.txt 2>&1
echo "pytest rc=$?"; tail -3 $OUT/tests.txt | cut -c1-300
