#!/bin/bash
timeout 250 python3 .work/sparse_diag.py 131072:1:64,131072:1:128,65536:1:64,262144:1:64 > $OUT/sparse.log 2>&1
echo "rc=$?"; cat $OUT/sparse.log | grep -v Warn | tr '|' '\n' | cut -c1-200
