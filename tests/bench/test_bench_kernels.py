"""bench/bench_kernels.py (kernels vs the BF16 baselines, GPU) runs end to end in its CPU smoke mode: the reference
kernels through the server's dispatch, torch SDPA as the baseline; the numbers mean nothing on CPU, the JSON's
structure and provenance do."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_smoke(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "bench_kernels.py"), "--smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=REPO / "bench")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "kernels.json").read_text())
    assert doc["device"] == "cpu" and doc["date"] and doc["versions"]["torch"]
    assert doc["command"].startswith("python bench/bench_kernels.py --smoke")
    kernels = {r["kernel"] for r in doc["rows"]}
    assert {"draft_dense", "draft_sparse", "quantize_pages", "select_topk_pages"} <= kernels, kernels
    assert not doc["missing"] and (tmp_path / "kernels.png").exists()
