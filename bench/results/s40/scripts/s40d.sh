#!/bin/bash
# session 40 D: work stealing, split-major: GPU tests (B 17), timings, timelines
timeout 150 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '-x', '-p', 'no:cacheprovider', 'tests/gpu/test_draft_tma_gpu.py', '-k', 'stealing and 17']))" > $OUT/tests.txt 2>&1
echo "pytest rc=$?"; grep -v "^\s*$" $OUT/tests.txt | tail -5 | cut -c1-300
timeout 240 python3 bench/dev_kernels.py --skip-check --quantize "" --verify "" \
  --draft "65536:8:64,131072:8:64,262144:8:64,131072:8:128,65536:32:64" \
  --variants "gl=1;gl=1,as=2,sc=4,sw=1;gl=1,as=2,sc=4,sw=1,ns=24;gl=1,as=2,sc=2,sw=1,ns=24;gl=1,as=2,sc=8,sw=1,ns=24;gl=1,as=2,sc=4,sw=1,ns=24,kq=2;gl=1;gl=1,as=2,sc=4,sw=1,ns=24" --out $OUT/steal > $OUT/steal.log 2>&1
echo "dev rc=$?"; grep "draft_dense\|Error\|error" $OUT/steal.log | cut -c1-600 | tail -30
timeout 100 python3 .work/draft_timeline.py 131072:8:64 $OUT steal=4,num_splits=24,stages=2 > $OUT/timeline.log 2>&1
echo "timeline rc=$?"; cut -c1-400 $OUT/timeline.log | grep -v Warning | tail -3
