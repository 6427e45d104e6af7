#!/bin/bash
# session 26 B: per-program dumps (B=1), A/B of the merge launch / loads (verify, drafts)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 .work/s26/prof26b.py 2>&1 | grep -v Warn | cut -c1-400
timeout 300 python3 .work/s26/ab26.py 8192:1,65536:1,131072:1,262144:1,65536:8,131072:8 2>&1 | grep -v Warn | cut -c1-400
