#!/bin/bash
# session 29 C (no kit): GPU tests (hot-token programs in the Gluon page launch, partial order 0 | splits | 1..), A/B
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/tests $OUT/ab
timeout ${TMO:-300} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', '${K:-draft_gluon or (draft_decode and 1-)}']))" > $OUT/tests/gpu_tests_draft.txt 2>&1; tail -3 $OUT/tests/gpu_tests_draft.txt
timeout ${TMO2:-200} python3 bench/dev_kernels.py --out $OUT/ab --skip-check --quantize "" --verify "" \
  --draft "131072:1:64,65536:1:64,262144:1:64,131072:1:128,65536:1:128" \
  --variants "gl=1;gl=1,fh=0;gl=1,fh=1;gl=1;gl=1,fh=0;gl=1,fh=1" \
  --draft-sparse "131072:1:64,131072:1:128,65536:1:64,8192:1:64" > $OUT/ab/log.txt 2>&1
grep -v "^\[" $OUT/ab/log.txt | tail -12
