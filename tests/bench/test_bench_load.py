"""bench/bench_load.py on the CPU (tiny random Llama): the mixed load's jobs and the result row."""
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_load  # noqa: E402


def test_mixed_jobs_cover_every_kind_and_length():
    jobs = bench_load.mixed_jobs(100, 300, 1000, page=64)
    kinds = Counter(k for k, _ in jobs)
    assert kinds["drop"] == 10 and kinds["abort"] == 10 and kinds["plain"] and kinds["stream"]
    lens = [len(p["input_ids"]) for _, p in jobs]
    assert min(lens) >= 1 and max(lens) <= 300 and {63, 64, 65} <= set(lens)
    assert all(p["rid"] for k, p in jobs if k == "abort") and bench_load.mixed_jobs(100, 300, 1000, page=64) == jobs


@pytest.mark.server
@pytest.mark.timeout(600)
def test_smoke_run_returns_every_page(tmp_path):
    out = bench_load.main(["--smoke", "--out", str(tmp_path / "load.json")])
    row = json.loads(Path(out).read_text())["rows"][0]
    assert row["kind"] == "load" and row["requests"] == 40 and row["errors"] == 0, row["error_samples"]
    assert row["pages_returned"] and row["free_tokens_before"] == row["free_tokens_after"] > 0
    assert row["server_alive"] and not row["leak_logged"]
