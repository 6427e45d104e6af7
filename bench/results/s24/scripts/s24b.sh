#!/bin/bash
# session 24 call 2: the 16 + 8 column split of the Gluon verify kernel: checks, GPU tests, A/B against HEAD (gm=base)
nvidia-smi --query-gpu=name --format=csv,noheader
DK="python3 bench/dev_kernels.py --quantize '' --draft ''"
timeout 150 python3 bench/dev_kernels.py --quantize "" --draft "" --out $OUT/chk5 --verify "" --check-variants "gl=1,gl=0" --nq 6 2>&1 | grep -i "check\|ok\|fail\|error" | tail -12
timeout 100 python3 bench/dev_kernels.py --quantize "" --draft "" --out $OUT/chk2 --verify "" --heads 4:2 --check-variants "gl=1" --nq 9 2>&1 | grep -i "fail\|error" | tail -5; grep -c "ok$" $OUT/chk2/dev_kernels.log
timeout 200 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','verify and 64']))" 2>&1 | tail -2
V="gl=1,gm=base,gl=1/off,gm=base/off"
timeout 250 python3 bench/dev_kernels.py --skip-check --quantize "" --draft "" --out $OUT/ab5 --verify 65536:8:64,131072:8:64,262144:8:64,131072:1:64,131072:32:64 --verify-variants "$V,gl=1,gm=base" 2>&1 | grep "^verify" | cut -c1-300
timeout 120 python3 bench/dev_kernels.py --skip-check --quantize "" --draft "" --out $OUT/ab8 --nq 8 --verify 131072:8:64 --verify-variants "$V" 2>&1 | grep "^verify" | cut -c1-300
timeout 120 python3 bench/dev_kernels.py --skip-check --quantize "" --draft "" --out $OUT/abal --alias 8 --verify 65536:8:64,131072:8:64 --verify-variants "gl=1,gm=base" 2>&1 | grep "^verify" | cut -c1-300
timeout 150 python3 bench/dev_kernels.py --skip-check --quantize "" --draft "" --out $OUT/abpy --heads 4:2 --nq 13 --verify 15360:32:64,15360:64:64 --verify-variants "gl=1/bf,gm=base/bf,gl=1/bf,gm=base/bf" 2>&1 | grep "^verify" | cut -c1-300
