#!/bin/bash
# session 28 B: the GPU verify tests (P = 64 and 128, Gluon and Triton)
timeout 560 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-rf','--maxfail=4','-p','no:cacheprovider','tests/gpu/test_kernels_gpu.py','-k','verify']))" > $OUT/gpu_tests_verify.txt 2>&1
tail -2 $OUT/gpu_tests_verify.txt | cut -c1-300; grep -m8 "^FAILED\|Error" $OUT/gpu_tests_verify.txt | cut -c1-300
