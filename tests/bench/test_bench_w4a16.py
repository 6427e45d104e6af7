"""bench/bench_w4a16.py (a draft pass's weight GEMMs per engine, GPU) runs end to end in its CPU smoke mode."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_smoke(tmp_path):
    out = tmp_path / "w.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "bench_w4a16.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["m"] for r in rows] == [1, 3]
    for r in rows:
        assert r["bf16_ms"] > 0 and r["twin_ms"] > 0 and r["copy_tbps"] > 0
        assert r["bytes_w4"] < r["bytes_bf16"] / 3  # fp32 here: 4 bits + a scale per 128 against 32 bits
