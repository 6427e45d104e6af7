#!/bin/bash
timeout 250 python3 .work/hotlast.py 65536:8:64,131072:8:64,131072:8:128,262144:8:64,65536:8:128,65536:1:64,131072:1:128 > $OUT/hotlast.log 2>&1
echo "rc=$?"; cat $OUT/hotlast.log | grep -v Warn | cut -c1-300 | tail -20
