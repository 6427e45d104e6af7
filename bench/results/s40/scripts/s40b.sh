#!/bin/bash
timeout 200 python3 .work/draft_timeline.py 65536:8:64,131072:8:64,262144:8:64,65536:1:64,131072:1:64 $OUT > $OUT/timeline.log 2>&1
echo "timeline rc=$?"; cut -c1-400 $OUT/timeline.log | grep -v Warning | tail -40
