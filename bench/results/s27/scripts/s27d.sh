#!/bin/bash
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 400 python3 .work/s27/ab27m.py 8192:1:s,32768:1:s,65536:1:s,131072:1:s,262144:1:s,131072:2:s,131072:4:s,65536:8:s,131072:8:s,8192:1:d,16384:1:d,65536:1:d,131072:1:d 2>&1 | grep -v Warn | cut -c1-300
