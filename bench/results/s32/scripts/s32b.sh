#!/bin/bash
# session 32 B/C: full kit install; GPU server tests of the Gluon verify (its batch-1 requests take the Gluon ring launch)
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
if [ ! -f /tmp/site/sglang/__init__.py ]; then mkdir -p /tmp/m && cp .devmodel/pycode-30m/* /tmp/m/ 2>/dev/null; bash /tmp/whlparts/install_on_device.sh > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200; fi
mkdir -p models/pycode-30m && cp /tmp/m/* models/pycode-30m/
OV=$(python3 -c "import sys, tempfile; sys.path.insert(0, 'bench'); from pathlib import Path; from acceptance_server import make_overlay; print(make_overlay(Path(tempfile.mkdtemp(prefix='ov-'))))")
export PYTHONPATH=$OV:/tmp/site
nvidia-smi --query-gpu=name --format=csv,noheader
R=$(python3 -c "import sys; sys.path[:0]=['tests/cpu','tests/gpu']; import test_server_gpu as t; r=t._gluon_ring_at_batch_1(); print('gluon ring at batch 1:', r); sys.exit(0 if r else 1)" 2>&1)
echo "$R" | tail -2 | cut -c1-300; echo "$R" | grep -q "gluon ring at batch 1: True" || exit 1
SGL_SPEC_TEST_DEVICE=cuda timeout ${TMO:-540} python3 -m pytest -q -x -rA -s -p no:cacheprovider tests/gpu/test_server_gpu.py \
  -k "${K:-gluon_verify_kernel_in_the_server}" > $OUT/server_tests_${N:-b}.txt 2>&1; grep "^\[gpu\]\|verify kernel" $OUT/server_tests_${N:-b}.txt | cut -c1-300 | head -20; tail -6 $OUT/server_tests_${N:-b}.txt | cut -c1-300
