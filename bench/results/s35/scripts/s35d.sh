#!/bin/bash
# session 35 D: GPU draft tests on the current kernels (session 34's _page_words refactor had only a CPU SASS check)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TT:-540} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--durations=5', 'tests/gpu/test_kernels_gpu.py', '-k', 'draft_decode or draft_gluon']))" > $OUT/tests.txt 2>&1; echo "pytest rc=$?"
tail -15 $OUT/tests.txt | cut -c1-300
