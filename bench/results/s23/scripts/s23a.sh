#!/bin/bash
# session 23 call A: kit install, Gluon verify GPU tests, dev A/B of the RAW-store change (gm=old: HEAD's kernel)
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
if [ ! -f /tmp/site/sglang/__init__.py ]; then mkdir -p /tmp/m && cp .devmodel/pycode-30m/* /tmp/m/ && bash /tmp/whlparts/install_on_device.sh > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200; fi
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
timeout ${T1:-200} python3 -c "import sys; sys.path[:0]=['bench']; import kernel_cases, pytest; sys.exit(pytest.main(['-q','-x','tests/gpu/test_kernels_gpu.py','-k','${K:-verify and 64}']))" > $OUT/gpu_tests.txt 2>&1
tail -3 $OUT/gpu_tests.txt | cut -c1-300
timeout 170 python3 bench/dev_kernels.py --out $OUT/dev_llama --draft "" --quantize "" \
  --verify 65536:1:64,131072:1:64,262144:1:64,65536:8:64,131072:8:64,262144:8:64 \
  --verify-variants ",gl=1,gl=1/off,gm=old,gm=old/off" --check-variants "gl=1,gl=1/bf" --nq 5 2>&1 | grep -v "^check.*ok$" | tail -9 | cut -c1-300
grep -c "ok$" $OUT/dev_llama/dev_kernels.log
timeout 100 python3 bench/dev_kernels.py --out $OUT/dev_pycode --draft "" --quantize "" --heads 4:2 --skip-check \
  --verify 15360:32:64,15360:64:64,8192:64:64,4096:32:64 --verify-variants "bf,gl=1/bf,gm=old/bf,gl=1/bf/off" --nq 13 2>&1 | tail -5 | cut -c1-300
