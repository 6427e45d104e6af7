#!/bin/bash
# session 31 J (no kit): GPU check of the committed Gluon ring launch (the last device seconds of the session)
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/tests
timeout ${TT:-95} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'ring_launch and (1-4097 or 17-63) and (dtype1 or dtype2)']))" > $OUT/tests/gpu_tests_ring_launch.txt 2>&1; tail -2 $OUT/tests/gpu_tests_ring_launch.txt | cut -c1-300
