"""bench/e2e_pair.py (both servers up at once, split out of test_bench_e2e.py): the memory fractions that give each
server an equal share of the card, its arguments, and (marker ``server``) its ``--smoke`` run on two real CPU servers
with two repeats merged."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


def test_pair_fractions_give_every_server_an_equal_share_of_the_card():
    """SGLang sizes a server's static memory as a fraction of the memory free when it starts (kv_pool_runtime's
    pre_model_load_memory), so the i-th server's fraction must grow with what the earlier ones took."""
    import e2e_pair

    for n in (1, 2, 3):
        fr = e2e_pair.fractions(n, 0.85)
        free, got = 1.0, []
        for f in fr:
            got.append(f * free)
            free -= f * free
        assert got == pytest.approx([0.85 / n] * n, abs=1e-3)
    assert e2e_pair.fractions(1, 0.85) == [0.85]


def test_pair_args_keep_bench_e2e_arguments():
    import e2e_pair

    a = e2e_pair.parse_args(["--modes", "bf16,spec-topk", "--gammas", "12", "--ctx", "15360", "--batch", "32,64",
                             "--repeats", "4", "--fractions", "0.4,0.7", "--out", "/tmp/x"])
    assert a.repeats == 4 and a.fractions == [0.4, 0.7] and a.modes == ["bf16", "spec-topk"]
    assert a.ctx == [15360] and a.batch == [32, 64] and a.budget_s == 3600  # client timeouts follow the budget
    with pytest.raises(SystemExit):
        e2e_pair.parse_args(["--repeats", "0", "--out", "/tmp/x"])


@pytest.mark.server
def test_pair_smoke_run_measures_every_cell_on_both_servers_each_repeat(tmp_path):
    """Both CPU servers up at once; each repeat measures every cell on each; the merge keeps the median run and the
    speedup is the merged spec rate over the merged bf16 rate of the same cell."""
    import e2e_pair

    out = tmp_path / "pair"
    # 48 new tokens (bench_e2e's smoke run takes 24): both servers' CPU processes share the cores, and under a loaded
    # CI machine a 24-token bf16 batch of 3 once finished a request before the last prefill (no steady window)
    merged = e2e_pair.main(["--smoke", "--ctx", "160", "--batch", "1,3", "--gen", "48", "--repeats", "2",
                            "--out", str(out)])
    for k in (0, 1):
        rep = json.loads((out / f"rep{k}.json").read_text())
        assert {(r["mode"], r["batch"], r["status"]) for r in rep["rows"]} == {
            (m, b, "ok") for m in ("bf16", "spec-topk") for b in (1, 3)}
        assert all(r["repeat"] == k for r in rep["rows"])
    doc = json.loads((out / "e2e.json").read_text())
    assert doc["meta"]["pair"]["repeats"] == 2 and len(doc["meta"]["merged_from"]) == 2
    rows = {(r["mode"], r["batch"]): r for r in doc["rows"]}
    assert set(rows) == {("bf16", 1), ("bf16", 3), ("spec-topk", 1), ("spec-topk", 3)}
    for (mode, b), r in rows.items():
        assert r["repeats"] == 2 and len(r["repeat_log_tok_per_s"]) == 2
        assert r["log_tok_per_s"] == min(r["repeat_log_tok_per_s"])  # the lower middle of two runs
        assert r["cached_tokens_per_req"] == 0
        assert r["log_speedup"] == pytest.approx(r["log_tok_per_s"] / rows[("bf16", b)]["log_tok_per_s"])
    assert merged["rows"]
