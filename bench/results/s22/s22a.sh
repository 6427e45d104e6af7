#!/bin/bash
# session 22: Gluon verify page programs: GPU correctness (reference) + dev timings against the Triton verify kernel
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
[ "${T1:-200}" = 0 ] || timeout ${T1:-200} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','${K:-verify and 64}']))" > $OUT/gpu_tests.txt 2>&1
tail -25 $OUT/gpu_tests.txt | cut -c1-400
timeout ${T2:-300} python3 bench/dev_kernels.py --out $OUT/dev --draft "" --quantize "" \
  --verify ${CELLS:-65536:1:64,131072:1:64,262144:1:64,65536:8:64,131072:8:64} \
  --verify-variants "${VV:-,gl=1,off,gl=1/off}" --check-variants "${CV:-gl=1,gl=1/bf}" --nq ${NQ:-5} 2>&1 | tail -40 | cut -c1-300
