"""bench/ncu_stalls.py on a small export in Nsight Compute's SASS-source CSV layout."""
import csv
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_shares_by_reason_and_opcode(tmp_path):
    reasons = ["stall_barrier", "stall_long_sb", "stall_wait"]
    hdr = (["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed"] + reasons
           + [r + " (Not Issued)" for r in reasons])
    rows = [  # (source, samples, executed, barrier, long_sb, wait)
        ("LDG.E.128 R4, desc[UR4][R2.64]", 10, 100, 0, 10, 0),
        ("@P0 BAR.SYNC.DEFER_BLOCKING 0x0", 30, 100, 30, 0, 0),
        ("HGMMA.64x32x16.F32 R24, R80, gdesc[UR48], RZ", 60, 200, 0, 0, 60),
    ]
    f = tmp_path / "k.sass.csv"
    with open(f, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Kernel Name", "k"])
        w.writerow(hdr)
        for i, (src, s, e, b, l, wt) in enumerate(rows):
            w.writerow([hex(i), src, s, e, b, l, wt, 0, 0, 0])
    out = subprocess.run([sys.executable, str(BENCH / "ncu_stalls.py"), str(f), "--top", "2"], capture_output=True,
                         text=True, check=True).stdout
    lines = [ln.split() for ln in out.splitlines()]
    assert ["wait", "60.0%"] in lines and ["barrier", "30.0%"] in lines and ["long_sb", "10.0%"] in lines
    assert ["HGMMA", "60.0%", "50.0%"] in lines  # samples share, executed share
    assert ["BAR", "30.0%", "25.0%"] in lines  # the predicate is not the opcode
    assert sum(1 for ln in out.splitlines() if "HGMMA.64x32x16" in ln or "BAR.SYNC" in ln) == 2  # --top 2
