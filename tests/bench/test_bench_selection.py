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


def test_in_server_cost_compares_matching_cells(tmp_path):
    """bench/selection_cost.py: GPU phase differences of the scored vs score-free server, per shared cell."""
    def doc(verify, pages, wall, cells):
        ph = {"round_wall_ms": wall, "gpu_pages_ms": pages, "gpu_draft_ms": 1.0, "gpu_verify_ms": verify,
              "gpu_accept_ms": 0.1, "host_pages_ms": 0.2}
        return {"rows": [{"ctx": c, "batch": b, "gamma": 6, "status": "ok", "device": "H200", "log_accept_len": 5.0,
                          "round_phases": ph} for c, b in cells]}
    scored = tmp_path / "a.json"
    free = tmp_path / "b.json"
    scored.write_text(json.dumps(doc(2.1, 0.05, 4.0, [(4096, 1), (15360, 64)])))
    free.write_text(json.dumps(doc(2.0, 0.03, 3.9, [(15360, 64), (8192, 8)])))
    out = tmp_path / "c.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "selection_cost.py"), "--scored", str(scored),
                           "--free", str(free), "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(out.read_text())
    assert [(r["ctx"], r["batch"]) for r in res["rows"]] == [(15360, 64)]  # the one cell both measured
    r = res["rows"][0]
    assert abs(r["extra_ms"] - 0.12) < 1e-9 and abs(r["share"] - 0.03) < 1e-9 and res["device"] == "H200"
    assert "3.0%" in proc.stdout
