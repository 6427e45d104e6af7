#!/bin/bash
# session 27 E: QP form of the Gluon draft (key scales folded into q): error + alternating timing, then GPU draft tests
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python3 .work/s27/ab27q.py 65536:1:d,131072:1:d,262144:1:d,32768:1:d,65536:8:d,131072:8:d,131072:1:s,65536:1:s,262144:1:s,131072:8:s,15360:32:s:4:2,15360:64:s:4:2,15360:32:d:4:2 2>&1 | grep -v Warn | cut -c1-330
timeout 240 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; from sgl_spec.kernels import draft_decode as dd; dd.GLUON_QP=True; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','draft_decode']))" > $OUT/gpu_tests_qp.txt 2>&1
tail -1 $OUT/gpu_tests_qp.txt | cut -c1-300; grep -m5 "Error\|assert\|FAIL" $OUT/gpu_tests_qp.txt | cut -c1-300
