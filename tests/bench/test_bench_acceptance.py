"""The acceptance study tool (bench/bench_acceptance.py, bench/prompts.py): its grid, its metrics, the committed
prompt set, and the --smoke run end to end on CPU (two real servers, one of them per-request, ~3 min on 2 cores)."""
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import bench_acceptance as ba  # noqa: E402
import prompts as prompt_set  # noqa: E402


def test_grids():
    quick = ba.grid(ba.parse_args(["--device", "cpu"]))
    full = ba.grid(ba.parse_args(["--device", "cpu", "--grid", "full"]))
    key = lambda c: (c["policy"], c["ratio"], c["gamma"])  # noqa: E731
    assert len(full) == 32 and len({key(c) for c in full}) == 32  # 4 γ x (dense + 3 topk + 3 streaming + 1 last)
    assert len(quick) == 20 and {key(c) for c in quick} <= {key(c) for c in full}
    at4 = [c for c in quick if c["gamma"] == 4]
    assert len(at4) == 8  # every policy and ratio at γ = 4
    for g in (2, 6, 8):  # the γ sweep: dense and each sparse policy at 7%
        assert sorted(key(c) for c in quick if c["gamma"] == g) == sorted(
            [("dense", None, g), ("topk", 0.07, g), ("streaming", 0.07, g), ("topk-last", 0.07, g)])
    half = ba.grid(ba.parse_args(["--device", "cpu", "--grid", "full", "--gammas", "2,4", "--policies", "topk"]))
    assert [key(c) for c in half] == [("topk", r, g) for g in (2, 4) for r in (0.03, 0.07, 0.15)]


def test_select_grid_and_per_request_servers():
    a = ba.parse_args(["--device", "cuda", "--grid", "select"])
    cfgs = ba.grid(a)
    sparse = [p for p in ba.SELECT_POLICIES if p != "dense"]
    assert len(cfgs) == 4 * (1 + 3 * len(sparse))  # dense + every sparse policy x 3 ratios, per γ
    todo = ba.jobs(a, cfgs)
    shared = [j for j in todo if j["shared"]]
    assert [j["gamma"] for j in shared] == [2, 4, 6, 8] and all(len(j["configs"]) == 3 * len(sparse) for j in shared)
    assert sorted(j["configs"][0]["policy"] for j in todo if not j["shared"]) == ["dense"] * 4
    args = ba.server_args(a, shared[1]["configs"][0], 15360, shared=True)
    i = args.index("--quantspec-draft-pages")
    assert args[i + 1: i + 8] == ["per-request", "--quantspec-topk-ratio", "0.03", "--quantspec-min-pages", "1",
                                  "--quantspec-sink-pages", "1"]
    assert args[args.index("--speculative-num-steps") + 1] == "4" and args[args.index("--max-running-requests") + 1] \
        == "34" and int(args[args.index("--max-total-tokens") + 1]) == 32 * (15360 + 128 + 128)
    assert ba.label(dict(policy="topk+r0.25+ema0.5", ratio=0.15)) == "topk+r0.25+ema0.5@0.15"
    own = ba.jobs(ba.parse_args(["--device", "cuda", "--grid", "select", "--no-per-request"]), cfgs)
    assert len(own) == len(cfgs) and not any(j["shared"] for j in own)
    # topk-last cannot share (its verify keeps queries instead of scoring)
    assert not ba.jobs(a, [dict(policy="topk-last", ratio=0.07, gamma=4)])[0]["shared"]


def test_policy_names():
    assert ba.policy_flags("topk") == ["--quantspec-draft-pages", "topk", "--quantspec-recent-share", "0",
                                       "--quantspec-score-smoothing", "none"]
    assert ba.policy_flags("topk+r0.5+ema0.7")[3:] == ["0.5", "--quantspec-score-smoothing", "ema",
                                                       "--quantspec-score-ema", "0.7"]
    assert ba.policy_flags("topk-last+max")[-1] == "max" and ba.policy_flags("streaming")[-1] == "streaming"
    for bad in ("lru", "topk+q", "streaming+r0.5", "topk+rX"):
        assert ba.policy_flags(bad) is None
    with pytest.raises(SystemExit):
        ba.parse_args(["--device", "cpu", "--policies", "topk,lru"])


def test_server_args_per_policy():
    a = ba.parse_args(["--device", "cuda"])
    dense = ba.server_args(a, dict(policy="dense", ratio=None, gamma=6), 15360)
    assert "--quantspec-dense-draft" in dense and "--quantspec-draft-pages" not in dense
    assert dense[dense.index("--speculative-num-steps") + 1] == "6" and "--disable-decode-cuda-graph" in dense
    last = ba.server_args(a, dict(policy="topk-last", ratio=0.03, gamma=4), 15360)
    i = last.index("--quantspec-draft-pages")
    assert last[i + 1: i + 8] == ["topk-last", "--quantspec-topk-ratio", "0.03", "--quantspec-min-pages", "1",
                                  "--quantspec-sink-pages", "1"]
    # fixed pool: 8 requests of the longest prompt + new tokens, page aligned
    assert int(last[last.index("--max-total-tokens") + 1]) == 8 * (15360 + 128 + 128)


def test_metrics_from_histograms():
    """Two prompts, γ = 3: h = [verifies accepting 0, 1, 2, 3 drafts]."""
    res = [{"meta_info": {"completion_tokens": 10, "spec_verify_ct": 4, "spec_num_correct_drafts": 6,
                          "spec_num_proposed_drafts": 12, "spec_correct_drafts_histogram": [1, 0, 1, 2]}},
           {"meta_info": {"completion_tokens": 5, "spec_verify_ct": 2, "spec_num_correct_drafts": 3,
                          "spec_num_proposed_drafts": 6, "spec_correct_drafts_histogram": [0, 1, 1]}}]
    m = ba.metrics(res, 3)
    assert m["hist"] == [1, 1, 2, 2] and m["verify_ct"] == 6
    assert m["keep_rate"] == 9 / 18 and m["tau"] == 15 / 6
    # per-token α from the histogram: 0*1 + 1*1 + 2*2 + 3*2 = 11 accepted; the 4 verifies with n < 3 rejected one
    assert m["alpha"] == 11 / (11 + 4)
    assert m["reach"] == pytest.approx([5 / 6, 4 / 6, 2 / 6])
    assert m["pos_accept"] == pytest.approx([5 / 6, 4 / 5, 2 / 4])


def test_alpha_matches_the_geometric_model():
    """Drafts accepted i.i.d. with probability α: the estimate recovers α at every γ, keep_rate falls with γ."""
    import random
    rng = random.Random(0)
    for gamma in (2, 4, 8):
        hist = [0] * (gamma + 1)
        for _ in range(20000):
            n = 0
            while n < gamma and rng.random() < 0.9:
                n += 1
            hist[n] += 1
        assert ba.alpha_mle(hist) == pytest.approx(0.9, abs=0.01)
    assert ba.alpha_mle([0, 0, 0]) is None


def test_rederive(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"rows": [{"hist": [1, 0, 3], "correct_drafts": 6, "proposed_drafts": 8,
                                          "alpha": 0.75}]}))
    ba.main(["--rederive", str(path)])
    r = json.loads(path.read_text())["rows"][0]
    assert r["alpha"] == 6 / 7 and r["keep_rate"] == 6 / 8
    assert "Leviathan" in json.loads(path.read_text())["alpha_definition"]


def test_committed_prompt_set():
    path = prompt_set.DEFAULT_OUT
    assert path.stat().st_size < 2 * 2**20
    data = json.loads(path.read_text())
    ps = data["prompts"]
    assert len(ps) >= 20
    lens = [p["n_tokens"] for p in ps]
    assert lens == prompt_set.targets(20, 4096, 15360) and min(lens) >= 4096 and max(lens) <= 15360
    assert all(len(p["input_ids"]) == p["n_tokens"] for p in ps)
    assert all(0 <= t < 8192 for p in ps for t in p["input_ids"])  # pycode-30m's vocabulary
    assert len({p["source"] for p in ps}) == len(ps)  # every prompt from a different file
    cut = prompt_set.load(path, limit=2, cut=600)
    assert [len(p["input_ids"]) for p in cut] == [600, 600] and cut[0]["input_ids"] == ps[0]["input_ids"][:600]


def test_prompts_are_the_starts_of_the_stdlib_files():
    """Decoding each prompt gives the start of the file it names (checked where that very file is at hand)."""
    from tokenizers import Tokenizer

    data = json.loads(prompt_set.DEFAULT_OUT.read_text())
    tok = Tokenizer.from_file(str(REPO / "tests" / "assets" / "tokenizer" / "tokenizer.json"))
    root = Path(sysconfig.get_paths()["stdlib"])
    same = [p for p in data["prompts"] if (root / p["source"]).is_file() and hashlib.sha256(
        (root / p["source"]).read_bytes()).hexdigest() == p["file_sha256"]]
    if not same:
        pytest.skip(f"this Python ({sys.version.split()[0]}) has none of the prompt files of {data['python']}")
    for p in same:
        text = (root / p["source"]).read_text(encoding="utf-8")
        assert tok.encode(text).ids[: p["n_tokens"]] == p["input_ids"], p["source"]


@pytest.mark.server
@pytest.mark.skipif(os.environ.get("SGL_SPEC_TEST_DEVICE", "cpu") != "cpu",
                    reason="the CPU smoke run; on the GPU machine run bench_acceptance.py --device cuda itself")
def test_smoke_run(tmp_path):
    out = tmp_path / "acceptance.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "bench_acceptance.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["device"] == "cpu" and doc["versions"]["sglang"] and "--smoke" in doc["command"]
    rows = {r["policy"]: r for r in doc["rows"]}
    assert set(rows) == {"topk-last", "streaming", "topk+r0.25+ema0.5"}
    assert {r["server"] for r in rows.values()} == {"own", "per-request"}
    for r in rows.values():
        g = r["gamma"]
        assert r["num_prompts"] == 2 and r["prompt_tokens"] == [600, 600]
        assert 0.0 <= r["alpha"] <= 1.0 and 1.0 <= r["tau"] <= g + 1
        assert len(r["pos_accept"]) == g and len(r["hist"]) == g + 1 and sum(r["hist"]) == r["verify_ct"]
        assert r["completion_tokens"] == 2 * 16
        accepted = sum(n * h for n, h in enumerate(r["hist"]))
        assert r["keep_rate"] == pytest.approx(accepted / (g * r["verify_ct"]))
        assert r["alpha"] == pytest.approx(accepted / (accepted + r["verify_ct"] - r["hist"][-1]))
        assert r["alpha"] >= r["keep_rate"]
    # lossless: fp32 on CPU, so every policy (own server or per-request) gives the very same greedy tokens
    assert doc["outputs"] == {"prompts": 2, "identical_across_configs": 2}
    lines = [x for x in proc.stdout.splitlines() if " α=" in x]
    assert len(lines) == 3, proc.stdout


def test_topk_head_and_lse_policies():
    """topk-head shares the per-request server; +lse configurations get per-request servers of their own kind."""
    a = ba.parse_args(["--device", "cuda", "--grid", "select", "--policies", "topk,topk-head,topk+lse,topk-head+lse",
                       "--gammas", "2,4"])
    cfgs = ba.grid(a)
    assert len(cfgs) == 2 * 4 * 3
    todo = ba.jobs(a, cfgs)
    assert len(todo) == 4 and all(j["shared"] and len(j["configs"]) == 6 for j in todo)
    for j in todo:
        kinds = {ba.page_score(c) for c in j["configs"]}
        assert len(kinds) == 1
        args = ba.server_args(a, j["configs"][0], 4096, shared=True)
        assert ("--quantspec-page-score" in args) == (kinds == {"lse"})
        if kinds == {"lse"}:
            assert args[args.index("--quantspec-page-score") + 1] == "lse"
    assert ba.label(dict(policy="topk-head+lse+r0.25", ratio=0.07)) == "topk-head+r0.25@0.07"
    assert ba.policy_flags("topk-head+lse")[:2] == ["--quantspec-draft-pages", "topk-head"]
    assert ba.policy_flags("topk-head+lse")[-2:] == ["--quantspec-page-score", "lse"]
