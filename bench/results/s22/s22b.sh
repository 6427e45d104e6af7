#!/bin/bash
# session 22: kit install, Gluon verify check + Triton/Gluon timings, FA3 verify grid with the Gluon engine
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
if [ ! -f /tmp/site/sglang/__init__.py ]; then mkdir -p /tmp/m && cp .devmodel/pycode-30m/* /tmp/m/ && bash /tmp/whlparts/install_on_device.sh > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200; fi
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 bench/dev_kernels.py --out $OUT/dev --draft "" --quantize "" \
  --verify 65536:1:64,131072:1:64,262144:1:64,65536:8:64,131072:8:64,262144:8:64 \
  --verify-variants ",gl=1,gl=r" --check-variants "gl=1,gl=1/bf" --nq 5 2>&1 | grep -v "^check.*ok$" | tail -12 | cut -c1-250
grep -c "ok$" $OUT/dev/dev_kernels.log
timeout ${TG:-330} python3 bench/bench_kernels.py --baselines fa3 --page 64 --kernels verify --ctx 65536,131072,262144 \
  --batch 1,8,32 --nq 5,8 --out $OUT/grid --time-budget-s ${TB:-300} > $OUT/grid.log 2>&1
grep "verify" $OUT/grid.log | cut -c1-200 | tail -40
