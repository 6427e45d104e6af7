#!/bin/bash
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 240 python3 .work/s26/ab26f.py 65536:1,131072:1,32768:1,16384:1,262144:1,65536:2 2>&1 | grep -v Warn | cut -c1-300
