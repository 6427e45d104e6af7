#!/bin/bash
# session 38 E: the draft's shared-memory ring at P = 64 (rule now GLUON_STREAM_PAGE_SIZES = (64, 128)): rule vs
# registers (as=0), dense and 7% drafts, then the GPU draft tests at P = 64 with the new rule
timeout 200 python3 bench/dev_kernels.py --out $OUT/ring64 --quantize "" --verify "" --skip-check \
  --draft "262144:1:64,131072:2:64,131072:4:64,65536:4:64,8192:8:64,32768:8:64,65536:8:64,131072:8:64,262144:8:64,16384:32:64,65536:32:64" \
  --draft-sparse "131072:1:64,131072:8:64,262144:8:64,65536:32:64" \
  --variants "gl=1;gl=1,as=0;gl=1;gl=1,as=0" > $OUT/ring64.log 2>&1; echo "rc=$?"
cut -c1-300 $OUT/ring64.log | grep -v "^  " | tail -20
timeout ${TMO:-300} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'test_draft_decode and 64']))" > $OUT/tests_e.txt 2>&1
echo "pytest rc=$?"; tail -4 $OUT/tests_e.txt | cut -c1-300
