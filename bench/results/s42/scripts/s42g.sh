#!/bin/bash
# session 42 (from s37g.sh; the model travels in the tree): full kit install (first call), then GPU server tests (pycode-30m) selected by K, output under $OUT
export PYTHONPATH=/tmp/site2 HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
if [ ! -f /tmp/site2/sglang/__init__.py ]; then SITE=/tmp/site2 bash /tmp/whlparts/install_on_device.sh > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200; fi
ls models/pycode-30m | head -3
OV=$(python3 -c "import sys, tempfile; sys.path.insert(0, 'bench'); from pathlib import Path; from acceptance_server import make_overlay; print(make_overlay(Path(tempfile.mkdtemp(prefix='ov-'))))")
export PYTHONPATH=$OV:/tmp/site2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton, sglang; print('torch', torch.__version__, 'triton', triton.__version__, 'sglang', sglang.__version__)"
R=$(python3 -c "import sys; sys.path[:0]=['tests/cpu','tests/gpu']; import test_server_gpu as t; r=t._gluon_ring_on(); print('gluon ring rule:', r); sys.exit(0 if r else 1)" 2>&1)
echo "$R" | tail -2 | cut -c1-300; echo "$R" | grep -q "gluon ring rule: True" || exit 1
SGL_SPEC_TEST_DEVICE=cuda timeout ${TMO:-520} python3 -m pytest -q -x -rA -s -p no:cacheprovider tests/gpu/test_server_gpu.py \
  -k "${K:?}" > $OUT/server_tests_${N:-b}.txt 2>&1; echo "pytest rc=$?"
grep "^\[gpu\]" $OUT/server_tests_${N:-b}.txt | cut -c1-400 | head -20; tail -4 $OUT/server_tests_${N:-b}.txt | cut -c1-300
