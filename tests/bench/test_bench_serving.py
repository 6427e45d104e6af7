"""bench/bench_serving.py: SGLang's own client (python -m sglang.bench_serving) against a stock and a quantspec
server on the CPU (tiny random Llama): the rows, the stock figures beside quantspec's, and the client's command."""
import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_serving  # noqa: E402

REQUIRED = ("kind", "model", "mode", "ctx", "concurrency", "ttft_p50_ms", "tpot_ms", "output_tok_per_s",
            "stock_ttft_p50_ms", "stock_tpot_ms", "stock_output_tok_per_s", "device", "sglang")


def test_configs_and_client_command(tmp_path):
    cfgs = bench_serving.parse_configs("inf:8:32,2.5:16:64")
    assert cfgs[0] == {"request_rate": math.inf, "concurrency": 8, "num_prompts": 32}
    assert cfgs[1]["request_rate"] == 2.5
    a = bench_serving.argparse.Namespace(python="py", ctx=1000, min_ctx=500, output_len=64)
    cmd = bench_serving.client_command(a, "http://h:1", tmp_path, cfgs[0], None, tmp_path / "o.jsonl")
    assert cmd[:3] == ["py", "-m", "sglang.bench_serving"] and "random-ids" in cmd
    assert cmd[cmd.index("--request-rate") + 1] == "inf" and cmd[cmd.index("--random-range-ratio") + 1] == "0.5"
    cmd = bench_serving.client_command(a, "http://h:1", tmp_path, cfgs[1], tmp_path / "d.jsonl", tmp_path / "o")
    assert cmd[cmd.index("--dataset-name") + 1] == "custom" and cmd[cmd.index("--sharegpt-output-len") + 1] == "64"


def test_stock_figures_sit_beside_quantspec():
    base = {"model": "m", "ctx": 10, "request_rate": math.inf, "concurrency": 2, "num_prompts": 3, "status": "ok"}
    rows = [{**base, "mode": "bf16", "tpot_ms": 4.0, "ttft_p50_ms": 10.0, "output_tok_per_s": 100.0},
            {**base, "mode": "spec-auto", "tpot_ms": 1.0, "ttft_p50_ms": 12.0, "output_tok_per_s": 300.0},
            {**base, "concurrency": 4, "mode": "spec-auto", "tpot_ms": 1.0, "ttft_p50_ms": 1.0}]
    bench_serving.attach_stock(rows)
    assert rows[1]["stock_tpot_ms"] == 4.0 and rows[1]["tpot_vs_stock"] == 0.25 and rows[1]["ttft_vs_stock"] == 1.2
    assert rows[2]["stock_tpot_ms"] is None and rows[2]["tpot_vs_stock"] is None  # no stock row of that config


@pytest.mark.server
@pytest.mark.timeout(900)
def test_smoke_run_with_sglangs_client(tmp_path):
    out = bench_serving.main(["--smoke", "--out", str(tmp_path)])
    doc = json.loads(Path(out).read_text())
    assert doc["meta"]["client"] == "python -m sglang.bench_serving" and doc["meta"]["versions"]["sglang"]
    rows = doc["rows"]
    assert {(r["mode"], r["request_rate"]) for r in rows} == {(m, x) for m in ("bf16", "spec-auto")
                                                             for x in (math.inf, 2.0)}
    for r in rows:
        assert r["status"] == "ok", r.get("reason")
        assert all(k in r for k in REQUIRED), [k for k in REQUIRED if k not in r]
        assert r["kind"] == "serving" and r["completed"] == r["num_prompts"] == 3 and r["failed_requests"] == 0
        assert r["ttft_p50_ms"] > 0 and r["output_tok_per_s"] > 0 and r["stock_ttft_p50_ms"] > 0
    dataset = next((tmp_path / "serving_logs").glob("dataset_*.jsonl")).read_text().splitlines()
    assert len(dataset) == 4 and json.loads(dataset[0])["conversations"][0]["value"]  # 3 prompts + the warm-up
