#!/bin/bash
# session 41 B: read-only stream rates by access pattern and launch shape
timeout 250 python3 .work/read_patterns.py > $OUT/read_patterns.log 2>&1; echo "rc=$?"; cut -c1-200 $OUT/read_patterns.log
