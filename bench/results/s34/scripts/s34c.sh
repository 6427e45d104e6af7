#!/bin/bash
# session 34 C: GPU draft tests with the ring forms; the launch rule (ring at P = 128 from 64 pairs) against forced
# registers / forced ring at P = 128 cells around the rule's edge
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${TT:-300} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'draft_decode or draft_gluon']))" > $OUT/tests.txt 2>&1; echo "pytest rc=$?"
tail -4 $OUT/tests.txt | cut -c1-300
timeout ${TMO:-220} python3 bench/dev_kernels.py --out $OUT/c --quantize "" --verify "" --skip-check \
  --draft "8192:8:128,32768:8:128,65536:8:128,131072:8:128,4096:64:128,16384:32:128,65536:4:128,8192:16:64" \
  --variants "gl=1;gl=1,as=0;gl=1,as=2" > $OUT/c.log 2>&1; echo "rc=$?"
cut -c1-300 $OUT/c.log
