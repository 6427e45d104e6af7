#!/bin/bash
# session 40 A: the dense draft's launch as a timeline; the key-scale fold on the TMA ring timed (kq 2 / 1 vs 0);
# the TMA ring's GPU tests after b649f7c (the strided partition's early first page gated)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
timeout 170 python3 .work/draft_timeline.py 65536:8:64,131072:8:64,262144:8:64,65536:1:64,131072:1:64 $OUT > $OUT/timeline.log 2>&1
echo "timeline rc=$?"; cut -c1-400 $OUT/timeline.log | grep -v Warning | tail -40
timeout 200 python3 bench/dev_kernels.py --quantize "" --verify "" \
  --draft "65536:8:64,131072:8:64,131072:8:128,262144:8:64,65536:1:64,131072:1:64,262144:1:64" \
  --variants "gl=1;gl=1,kq=2;gl=1,kq=1;gl=1;gl=1,kq=2" --draft-sparse "131072:1:64,131072:8:64" --out $OUT/kq > $OUT/kq.log 2>&1
echo "dev rc=$?"; grep -v "^\s*$" $OUT/kq.log | cut -c1-400 | tail -30
timeout 200 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-rf', '--maxfail=3', '-p', 'no:cacheprovider', 'tests/gpu/test_draft_tma_gpu.py']))" > $OUT/tests.txt 2>&1
echo "pytest rc=$?"; tail -3 $OUT/tests.txt | cut -c1-300
