#!/bin/bash
# session 41 A: the draft's stream rate against where its bytes lie (layout_diag.py)
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
timeout 280 python3 .work/layout_diag.py 131072:8:64,65536:8:64,131072:8:128,65536:1:64,131072:1:64 > $OUT/layout.log 2>&1
echo "rc=$?"; cat $OUT/layout.log | tr '|' '\n' | cut -c1-200
