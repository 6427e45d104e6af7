#!/bin/bash
# session 21: e2e A/B of the draft kernel (auto = gluon vs triton), sparse and dense drafts, alternating, 2 repeats
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
if [ ! -f /tmp/site/sglang/__init__.py ]; then mkdir -p /tmp/m && cp .devmodel/pycode-30m/* /tmp/m/ && bash /tmp/whlparts/install_on_device.sh > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200; fi
pkill -f sglang.launch_server; sleep 1
timeout ${TMO:-540} python3 bench/e2e_pair.py --model pycode-30m=/tmp/m --modes ${MODES:-spec-topk,spec-triton,spec-dense,spec-dense-triton} --gammas 12 \
  --ctx ${CTX:-15360,8192} --batch ${BATCH:-64,32} --gen 930 --repeats ${REP:-2} --budget-s 3000 --no-plot --out $OUT/ab > $OUT/ab.log 2>&1
grep -i "tok/s\|cell\|ratio\|error" $OUT/ab.log | tail -30 | cut -c1-250
