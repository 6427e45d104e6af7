#!/bin/bash
# session 22: final Gluon verify: check + Llama cells (scores on/off) + pycode-30m server shapes, then GPU server tests
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 bench/dev_kernels.py --out $OUT/dev_llama --draft "" --quantize "" \
  --verify 65536:1:64,131072:1:64,262144:1:64,65536:8:64,131072:8:64,262144:8:64 \
  --verify-variants ",off,gl=1,gl=1/off" --check-variants "gl=1,gl=1/bf" --nq 5 2>&1 | grep -v "^check.*ok$" | tail -8 | cut -c1-250
grep -c "ok$" $OUT/dev_llama/dev_kernels.log
timeout 100 python3 bench/dev_kernels.py --out $OUT/dev_pycode --draft "" --quantize "" --heads 4:2 --skip-check \
  --verify 15360:32:64,15360:64:64,8192:64:64,4096:32:64 --verify-variants "bf,gl=1/bf" --nq 13 2>&1 | tail -5 | cut -c1-250
if [ -n "$SERVER" ]; then bash .work/s21a.sh; fi
