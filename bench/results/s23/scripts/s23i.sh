#!/bin/bash
# merge kernel: one-step loads (new) vs the loop form (old), A/B/A on one machine
nvidia-smi --query-gpu=name --format=csv,noheader
run() { timeout 100 python3 bench/dev_kernels.py --out $OUT/$1 --verify "" --quantize "" $2 --draft 65536:1:64,131072:1:64,262144:1:64,65536:8:64 --draft-sparse 131072:1:64,65536:1:64 --variants "gl=1" 2>&1 | grep "^draft" | sed "s/^/$1 /" | cut -c1-200; }
run new1 ""
cp .work/draft_merge_old.py kernels/draft_merge.py; run old --skip-check
cp .work/draft_merge_new.py kernels/draft_merge.py; run new2 --skip-check
grep -c "ok$" $OUT/new1/dev_kernels.log; grep -c "FAIL" $OUT/new1/dev_kernels.log
timeout 150 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','draft_decode']))" 2>&1 | tail -1
