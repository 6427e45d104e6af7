#!/bin/bash
# session 37 F: H200 power and SM clock of the verify with parts of its data zeroed (lower planes, key planes, value
# planes, q), each against real data in the same process
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
for v in zl zk zv zq; do python3 .work/clk.py 131072 8 64 bf/gl=1 $v 2>&1 | tee -a $OUT/clk.log; done
kill $SMI
python3 - <<'PY'
import csv, datetime, re, os
out = os.environ["OUT"]
rows = list(csv.reader(open(f"{out}/smi.csv")))[1:]
ph = [l.split() for l in open(f"{out}/clk.log") if l.startswith("phase")]
for p in ph:
    a, b = map(float, p[2].split("-"))
    sel = []
    for r in rows:
        try:
            t = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
        except Exception:
            continue
        if a + 0.5 < t < b - 0.2:
            sel.append(r)
    clk = [float(r[1].split()[0]) for r in sel]; pw = [float(r[3].split()[0]) for r in sel]
    rs = sorted({r[5].strip() for r in sel})
    print(p[1], p[4], f"n={len(sel)} sm_clk med {sorted(clk)[len(clk)//2] if clk else 0:.0f} min {min(clk) if clk else 0:.0f} power med {sorted(pw)[len(pw)//2] if pw else 0:.0f} W max {max(pw) if pw else 0:.0f} reasons {rs}")
PY
