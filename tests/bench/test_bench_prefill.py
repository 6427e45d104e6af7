"""bench/bench_prefill.py (prefill attention paths, GPU) runs end to end in its CPU smoke mode."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_smoke(tmp_path):
    out = tmp_path / "p.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "bench_prefill.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["prefix"] for r in rows] == [0, 96]
    for r in rows:
        assert r["sdpa_fp16_ms"] > 0 and r["einsum_fp32_ms"] > 0 and r["bf16_sdpa_ms"] > 0
        assert r["max_abs_diff"] < 0.05  # fp16 inputs vs fp32 (outputs of size ~1)
        assert r["fa3_ms"] > 0 and r["stock_fa3_ms"] > 0 and r["quantize_ms"] > 0  # FA3 through the tests' stand-in
        assert r["fa3_max_abs_diff"] < 0.05
    assert len([x for x in proc.stdout.splitlines() if x.startswith("shape")]) == 2
