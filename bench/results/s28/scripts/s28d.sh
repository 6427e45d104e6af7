#!/bin/bash
# session 28 D: hot launch by pairs; GPU draft tests at P = 128; issue 2's full grid (P = 64 and 128, 8k-256k) with FA3
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
timeout 100 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-rf','--maxfail=4','-p','no:cacheprovider','tests/gpu/test_kernels_gpu.py','-k','draft_decode and 128']))" > $OUT/gpu_tests_draft128.txt 2>&1
tail -1 $OUT/gpu_tests_draft128.txt | cut -c1-300; grep -m8 "^FAILED\|Error" $OUT/gpu_tests_draft128.txt | cut -c1-300
timeout 330 python3 bench/bench_kernels.py --baselines fa3 --page 64,128 --ctx 8192,32768,65536,131072,262144 --batch 1,8,32 \
  --nq 5,8 --out $OUT/grid --time-budget-s 310 > $OUT/grid.log 2>&1
grep "^ctx\|done\|budget\|criterion\] quantize" $OUT/grid.log | cut -c1-200
