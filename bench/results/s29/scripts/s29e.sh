#!/bin/bash
# session 29 E: full kit install; GPU server tests touching the Gluon drafts at batch 1 (hot-token programs fused)
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
if [ ! -f /tmp/site/sglang/__init__.py ]; then mkdir -p /tmp/m && cp .devmodel/pycode-30m/* /tmp/m/ 2>/dev/null; bash /tmp/whlparts/install_on_device.sh > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200; fi
mkdir -p models/pycode-30m && cp /tmp/m/* models/pycode-30m/
OV=$(python3 -c "import sys, tempfile; sys.path.insert(0, 'bench'); from pathlib import Path; from acceptance_server import make_overlay; print(make_overlay(Path(tempfile.mkdtemp(prefix='ov-'))))")
export PYTHONPATH=$OV:/tmp/site
SGL_SPEC_TEST_DEVICE=cuda timeout ${TMO:-400} python3 -m pytest -q -x -rA -s -p no:cacheprovider tests/gpu/test_server_gpu.py \
  -k "${K:-spec_greedy_equals or graph_drafts_equal or replay_cuda_graphs}" > $OUT/server_tests.txt 2>&1; grep "^\[gpu\]\|draft kernel" $OUT/server_tests.txt | cut -c1-300 | head -20; tail -6 $OUT/server_tests.txt | cut -c1-300
