#!/bin/bash
# session 39 D: GPU tests of the TMA ring (on by default), then the TMA ring's stream without scale copies and 3 slots
timeout 260 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_draft_tma_gpu.py', 'tests/gpu/test_kernels_gpu.py', '-k', 'tma or test_draft_decode']))" > $OUT/tests.txt 2>&1
echo "pytest rc=$?"; tail -4 $OUT/tests.txt | cut -c1-300
timeout 150 python3 .work/draft_diag.py 131072:8:64,262144:8:64 > $OUT/diag.log 2>&1
echo "diag rc=$?"; cut -c1-700 $OUT/diag.log | tail -3
timeout 120 python3 bench/dev_kernels.py --out $OUT/dev --quantize "" --verify "" --skip-check \
  --draft "131072:8:64,262144:8:64,131072:8:128,262144:1:64" \
  --variants "gl=1,tma=1;gl=1,tma=1,as=3;gl=1,tma=0;gl=1,tma=1;gl=1,tma=1,as=3" > $OUT/dev.log 2>&1; echo "dev rc=$?"
grep -v "^  " $OUT/dev.log | cut -c1-300 | tail -5
