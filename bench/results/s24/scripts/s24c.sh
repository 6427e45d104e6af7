#!/bin/bash
# session 24 kit call 1: install, dev checks of the split verify kernel (G = 4 nq 5/6, G = 2 nq 9), GPU kernel tests
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
if [ ! -f /tmp/site/sglang/__init__.py ]; then mkdir -p /tmp/m && cp .devmodel/pycode-30m/* /tmp/m/ && bash /tmp/whlparts/install_on_device.sh > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200; fi
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 bench/dev_kernels.py --quantize "" --draft "" --out $OUT/chk4 --verify 131072:8:64 --verify-variants "gl=1,gl=1/off" --check-variants "gl=1,gl=0" --nq 6 > $OUT/chk4.log 2>&1
grep -c "ok$" $OUT/chk4/dev_kernels.log; grep -i "fail\|error\|worst" $OUT/chk4.log | head -5; grep "^verify" $OUT/chk4.log
timeout 100 python3 bench/dev_kernels.py --quantize "" --draft "" --out $OUT/chk2 --heads 4:2 --verify 15360:32:64 --verify-variants "gl=1" --check-variants "gl=1" --nq 9 > $OUT/chk2.log 2>&1
grep -c "ok$" $OUT/chk2/dev_kernels.log; grep -i "fail\|error" $OUT/chk2.log | head -5; grep "^verify" $OUT/chk2.log
timeout 280 python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','verify']))" > $OUT/gpu_tests.txt 2>&1
tail -2 $OUT/gpu_tests.txt | cut -c1-300
