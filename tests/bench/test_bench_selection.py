"""bench/bench_selection.py (selection cost tool, GPU) runs end to end in its CPU smoke mode: reference kernels, two
layers, tiny contexts; its numbers mean nothing on CPU, the structure of its output does."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_smoke(tmp_path):
    out = tmp_path / "sel.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "bench_selection.py"), "--smoke", "--ctx", "300",
                           "--policies", "topk,topk+r0.5+max,topk-head", "--out", str(out)], capture_output=True, text=True,
                          timeout=600, cwd=REPO / "bench")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["device"] == "cpu" and "upper bound" in res["note"]
    assert [(r["ctx"], r["batch"]) for r in res["rows"]] == [(300, 1), (300, 2)]
    for r in res["rows"]:
        assert r["pages_drafted"] == 4 and r["L"] == 2  # 4 complete pages < min 8: every page
        assert set(r["policies"]) == {"topk", "topk+r0.5+max", "topk-head"} and r["scores_lse_ms"] > 0
        for p in r["policies"].values():
            assert p["round_ms"] > 0 and p["select_ms"] > 0 and p["host_ms"] > 0 and p["for_round_ms"] > 0
    assert set(res["worst_overhead"]) == {"topk", "topk+r0.5+max", "topk-head"}
    lines = [x for x in proc.stdout.splitlines() if x.startswith("pycode-30m")]
    assert len(lines) == 2 and "UPPER BOUND" in proc.stdout, proc.stdout

