#!/bin/bash
# session 35 I: after moving the ring rule into draft_launch.gluon_stream_stages: the rule check and GPU draft tests
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 python3 .work/chk_rule.py 2>&1 | tail -6
timeout ${TT:-220} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'draft_decode and dense']))" > $OUT/tests.txt 2>&1; echo "pytest rc=$?"
tail -3 $OUT/tests.txt | cut -c1-300
