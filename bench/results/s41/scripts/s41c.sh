#!/bin/bash
# session 41 C: the dense draft's time by launch (parts_diag.py)
timeout 280 python3 .work/parts_diag.py 65536:8:64,131072:8:64,131072:8:128,65536:1:64,131072:1:64 > $OUT/parts.log 2>&1
echo "rc=$?"; cat $OUT/parts.log | grep -v Warn | tr '|' '\n' | cut -c1-200
