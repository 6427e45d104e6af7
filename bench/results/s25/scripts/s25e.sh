#!/bin/bash
# session 25 E: hot-token launch order for the draft, verify ring order on the final kernel, batch-1/2/4 engine choice
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','verify_gluon_ring_order or (draft_decode and 64)']))" > $OUT/gpu_tests.txt 2>&1
tail -1 $OUT/gpu_tests.txt | cut -c1-300
timeout 150 python3 bench/dev_kernels.py --out $OUT/draft --quantize "" --verify "" --skip-check \
  --draft "65536:1:64,131072:1:64,262144:1:64,65536:8:64,131072:8:64" --draft-sparse "131072:1:64,65536:1:64,131072:8:64" \
  --variants "ho=last;ho=early;ho=last" 2>&1 | grep "^draft" | cut -c1-400
timeout 100 python3 bench/dev_kernels.py --out $OUT/draftP --quantize "" --verify "" --skip-check --heads 4:2 \
  --draft "15360:32:64,15360:64:64" --draft-sparse "15360:32:64,15360:64:64,8192:64:64" --min-pages 8 --kcap 18 \
  --variants "ho=last;ho=early;ho=last" 2>&1 | grep "^draft" | cut -c1-400
timeout 100 python3 bench/dev_kernels.py --out $OUT/vfin --draft "" --quantize "" --skip-check \
  --verify "65536:8:64,131072:8:64" --verify-variants "gl=1/bf/ro=early,gl=1/bf,gl=1/bf/ro=early,gl=1/bf" 2>&1 | grep "verify nq" | cut -c1-400
timeout 120 python3 bench/dev_kernels.py --out $OUT/vsmall --draft "" --quantize "" --skip-check \
  --verify "4096:1:64,8192:1:64,15360:1:64,32768:1:64,32768:2:64,131072:2:64,32768:4:64,131072:4:64" \
  --verify-variants "bf,gl=1/bf,bf,gl=1/bf" 2>&1 | grep "verify nq" | cut -c1-400
