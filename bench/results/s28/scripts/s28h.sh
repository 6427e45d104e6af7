#!/bin/bash
# session 28 H: the GPU server test at --page-size 128
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 SGLANG_USE_SGL_FA3_KERNEL=1
if [ ! -f /tmp/site/sglang/__init__.py ]; then mkdir -p /tmp/m && cp .devmodel/pycode-30m/* /tmp/m/ && bash /tmp/whlparts/install_on_device.sh > /tmp/install.log 2>&1; tail -1 /tmp/install.log | cut -c1-200; fi
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p models/pycode-30m && cp .devmodel/pycode-30m/* models/pycode-30m/
OV=$(python3 -c "import sys, tempfile; sys.path.insert(0, 'bench'); from pathlib import Path; from acceptance_server import make_overlay; print(make_overlay(Path(tempfile.mkdtemp(prefix='ov-'))))")
export PYTHONPATH=$OV:/tmp/site
SGL_SPEC_TEST_DEVICE=cuda timeout ${TMO:-540} python3 -m pytest -q -x -rA -s -p no:cacheprovider tests/gpu/test_server_gpu.py \
  -k "${K:-page_128}" > $OUT/server_tests.txt 2>&1; grep "^\[gpu\]\|draft kernel" $OUT/server_tests.txt | cut -c1-300 | head -20; tail -8 $OUT/server_tests.txt | cut -c1-300
