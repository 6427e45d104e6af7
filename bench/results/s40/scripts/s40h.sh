timeout 200 python3 .work/tr_check.py 4097:3:64,4097:3:128,65536:8:64,131072:8:64,131072:8:128,262144:8:64 > $OUT/tr.log 2>&1; echo rc=$?; grep -v Warn $OUT/tr.log | cut -c1-400
