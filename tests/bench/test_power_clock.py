"""bench/power_clock.py's nvidia-smi parsing and window summaries, on the CPU (the sampling itself needs a GPU)."""
from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import power_clock as pc  # noqa: E402

HEADER = ("timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], temperature.gpu, "
          "clocks_event_reasons.active")


def _csv(start: datetime.datetime, rows) -> str:
    """rows of (seconds after start, SM MHz, W, reasons) as nvidia-smi writes them, 100 ms apart."""
    lines = [HEADER]
    for dt, mhz, w, why in rows:
        t = start + datetime.timedelta(seconds=dt)
        lines.append(f"{t:%Y/%m/%d %H:%M:%S}.{t.microsecond // 1000:03d}, {mhz} MHz, 3201 MHz, {w:.2f} W, 45, {why}")
    return "\n".join(lines) + "\n"


def test_parse_skips_the_header_and_cut_lines():
    start = datetime.datetime(2026, 11, 28, 10, 0, 0)
    text = _csv(start, [(0.0, 1980, 555.0, "0x0000000000000000"), (0.1, 1650, 695.5, "0x0000000000000004")])
    text += "2026/11/28 10:00:00.300, 1500 MH"  # the sampler killed mid-line
    s = pc.parse_smi(text)
    assert [x["sm_mhz"] for x in s] == [1980.0, 1650.0]
    assert s[1]["watts"] == 695.5 and s[1]["reasons"] == "0x0000000000000004"
    assert abs(s[1]["t"] - s[0]["t"] - 0.1) < 1e-6
    assert s[0]["t"] == start.timestamp()  # local time, as time.time() on the same machine


def test_summary_keeps_the_window_without_its_edges():
    start = datetime.datetime(2026, 11, 28, 10, 0, 0)
    # 0.0-0.4 s: the previous kernel's clock (inside the trimmed head); 0.5-2.9 s: capped; 3.0 s: past the tail trim
    rows = [(i / 10, 1980, 500.0, "0x0") for i in range(5)]
    rows += [(0.5 + i / 10, 1600 + 10 * (i % 3), 690.0 + i % 2, "0x4") for i in range(25)]
    rows += [(3.0, 1980, 300.0, "0x0")]
    s = pc.parse_smi(_csv(start, rows))
    t0 = start.timestamp()
    r = pc.summarize(s, t0, t0 + 3.1)
    inside = [x for x in s if t0 + pc.TRIM_HEAD_S < x["t"] < t0 + 3.1 - pc.TRIM_TAIL_S]
    assert r["samples"] == len(inside) > 20
    assert r["sm_mhz_min"] == 1600 and r["sm_mhz_median"] == 1610
    assert r["watts_max"] == 691.0 and r["reasons"] == ["0x4"]
    assert pc.summarize(s, t0 + 100, t0 + 101) == dict(samples=0)


def test_unknown_kernel_is_one_line_at_startup():
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "power_clock.py"), "--kernels", "verify,bogus"],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert "unknown --kernels ['bogus']" in p.stderr.strip().splitlines()[-1]
