#!/bin/bash
# session 31 H (no kit): the ring split in the merge programs (fused_ring="merge", fr=2) against the ring launch
# (fr=0) and the ring program in the page launch (fr=1); a check of fr=2 against the reference first
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/rm5 $OUT/rm8 $OUT/rmb8
timeout 150 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', 'tests/gpu/test_kernels_gpu.py', '-k', 'fused_ring and (1-4097 or 3-63) and (dtype1 or dtype2)']))" > $OUT/check.txt 2>&1; tail -2 $OUT/check.txt | cut -c1-300
V="bf/gl=1/fr=0,bf/gl=1/fr=1,bf/gl=1/fr=2"
timeout 200 python3 bench/dev_kernels.py --out $OUT/rm5 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "262144:1:64,131072:1:64,65536:1:64,32768:1:64,8192:1:64,262144:1:128,131072:1:128,65536:1:128,32768:1:128,8192:1:128" \
  --verify-variants "$V,$V" > $OUT/rm5/log.txt 2>&1
grep -v "^\[" $OUT/rm5/log.txt | tail -10
timeout 100 python3 bench/dev_kernels.py --out $OUT/rm8 --skip-check --quantize "" --draft "" --nq 8 \
  --verify "262144:1:64,131072:1:64,32768:1:64,8192:1:64" --verify-variants "$V,$V" > $OUT/rm8/log.txt 2>&1
grep -v "^\[" $OUT/rm8/log.txt | tail -4
timeout 100 python3 bench/dev_kernels.py --out $OUT/rmb8 --skip-check --quantize "" --draft "" --nq 5 \
  --verify "131072:8:64,65536:8:128,32768:2:64" --verify-variants "bf/gl=1,bf/gl=1/fr=2,bf/gl=1,bf/gl=1/fr=2" > $OUT/rmb8/log.txt 2>&1
grep -v "^\[" $OUT/rmb8/log.txt | tail -3
