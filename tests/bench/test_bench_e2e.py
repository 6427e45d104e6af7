"""bench/bench_e2e.py: the window arithmetic, log parsing, prompts, server settings and derived results on
synthetic inputs, plus (marker ``server``) the ``--smoke`` run: two real CPU servers, every code path end to end."""
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import e2e_client  # noqa: E402
import e2e_results  # noqa: E402
import common  # noqa: E402
import e2e_server  # noqa: E402
from e2e_prompts import PythonCorpus, random_prompts  # noqa: E402

TOKENIZER = Path(__file__).resolve().parents[1] / "assets" / "tokenizer" / "tokenizer.json"


def _trace(t_first, step, n_chunks, per_chunk, t_send=0.0, verify_ct=None):
    """First chunk (1 token) at t_first, then n_chunks chunks of per_chunk tokens every step seconds."""
    ev = [(t_first, t_first, 1)] + [(t_first + step * (i + 1),) * 2 + (per_chunk,) for i in range(n_chunks)]
    total = 1 + n_chunks * per_chunk
    meta = {"completion_tokens": total}
    if verify_ct is not None:
        meta["spec_verify_ct"] = verify_ct
    return {"t_send": t_send, "events": ev, "meta": meta, "error": None}


def test_window_metrics_exact_on_synthetic_streams():
    # 2 requests, a chunk of 3 tokens every 10 ms; the second starts 50 ms later (its prefill), both run 100 chunks
    traces = [_trace(1.00, 0.01, 100, 3, verify_ct=100), _trace(1.05, 0.01, 100, 3, verify_ct=100)]
    m = e2e_client.window_metrics(traces, skip=3)
    assert m["status"] == "ok"
    # window: from the 2nd request's first decode chunk (≥ 1+3 tokens at 1.06) to the 1st one's end (2.00)
    assert m["window_s"] == pytest.approx(0.94)
    # tokens strictly after 1.06 up to 2.00: request 1 chunks at 1.07 … 2.00 (94 chunks), request 2 1.07 … 2.00 (94)
    assert m["window_tokens"] == 2 * 94 * 3
    assert m["tok_per_s"] == pytest.approx(2 * 94 * 3 / 0.94)
    assert m["itl_p50_ms"] == pytest.approx(10 / 3) and m["chunk_gap_p50_ms"] == pytest.approx(10)
    assert m["itl_mean_ms"] == pytest.approx(10 / 3)
    assert m["accept_length"] == pytest.approx(3.0)  # (301 - 1) tokens / 100 rounds
    assert m["prefill_done_s"] == pytest.approx(1.05)


def test_timeline_locates_a_stall_after_the_window():
    # request 2 finishes 40 chunks after request 1, and pauses 1.5 s after its 120th chunk
    one = _trace(1.00, 0.01, 100, 3, verify_ct=100)
    two = _trace(1.05, 0.01, 140, 3, verify_ct=210)  # 420 tokens in 210 rounds: τ 2, done last
    two["events"] = two["events"][:121] + [(t + 1.5, r + 1.5, n) for t, r, n in two["events"][121:]]
    m = e2e_client.window_metrics([one, two], skip=3)
    assert m["decode_start_s"] == pytest.approx(1.06) and m["first_done_s"] == pytest.approx(2.00)
    assert m["cell_s"] == pytest.approx(1.05 + 1.40 + 1.5)
    assert m["tail_s"] == pytest.approx(m["cell_s"] - 2.00)
    assert m["max_gap_s"] == pytest.approx(1.51) and m["max_gap_at_s"] == pytest.approx(1.05 + 1.20)
    assert (m["accept_length_min"], m["accept_length_max"], m["last_done_accept_length"]) == (2.0, 3.0, 2.0)
    assert "accept_length_min" not in e2e_client.window_metrics([_trace(1.0, 0.01, 50, 1)] * 2, skip=1)


def test_serving_time_compilations_from_the_server_log():
    text = ("[2026-12-07 15:29:51] Triton kernel '_gemv_kernel' took 1.05 s to compile after serving started. "
            "Serving-time compilation can stall the engine; pre-compile it during engine init.\n"
            "[2026-12-07 15:29:52] Decode batch, #running-req: 3\n"
            "[2026-12-07 15:29:53] Triton kernel '_draft_decode_kernel' took 2.18 s to compile after serving started.")
    assert e2e_server.serving_compiles(text) == [["_gemv_kernel", 1.05], ["_draft_decode_kernel", 2.18]]
    assert e2e_server.serving_compiles(LOG) == []


def test_window_metrics_reports_missing_windows_and_failures():
    late = [_trace(1.0, 0.01, 10, 1), _trace(5.0, 0.01, 10, 1)]  # the first finished before the second started
    assert e2e_client.window_metrics(late, skip=1)["status"] == "no_window"
    short = [_trace(1.00, 0.01, 10, 1), _trace(1.05, 0.01, 10, 1)]  # 4 tokens each between 1.06 and 1.10
    assert e2e_client.window_metrics(short, skip=1, min_tokens=5)["status"] == "no_window"
    assert e2e_client.window_metrics(short, skip=1, min_tokens=4)["window_tokens"] == 8
    bad = [_trace(1.0, 0.01, 10, 1), {"t_send": 0, "events": [], "meta": {}, "error": "HTTP 500: boom"}]
    m = e2e_client.window_metrics(bad)
    assert m["status"] == "failed" and "HTTP 500" in m["reason"]


LOG = """\
[2026-11-21 00:57:26] quantspec KV cache allocated: #tokens 4096, pages 0.001 GB (152.0 bytes/token = 9.50 \
bits/element; a torch.float32 cache needs 512 bytes/token: 3.37x as many tokens fit), hot rings 0.001 GB for 17 \
request slots
[2026-11-21 00:57:29] Decode batch, #running-req: 3, #token: 128, token usage: 0.03, accept len: 3.00, accept rate: \
1.00, cuda graph: True, gen throughput (token/s): 2.56, #queue-req: 0
[2026-11-21 00:57:29] Decode batch, #running-req: 3, #token: 128, token usage: 0.03, accept len: 2.50, accept rate: \
1.00, cuda graph: True, gen throughput (token/s): 300.0, #queue-req: 0
[2026-11-21 00:57:29] Decode batch, #running-req: 2, #token: 128, token usage: 0.03, cuda graph: True, gen \
throughput (token/s): 999.0, #queue-req: 0
[2026-11-21 00:57:30] Decode batch, #running-req: 3, #token: 128, token usage: 0.03, accept len: 2.00, accept rate: \
1.00, cuda graph: True, gen throughput (token/s): 100.0, #queue-req: 0
[2026-11-21 00:57:30] Decode batch, #running-req: 3, #token: 128, token usage: 0.03, accept len: 2.00, accept rate: \
1.00, cuda graph: True, gen throughput (token/s): 200.0, #queue-req: 0
"""


def test_log_parsing():
    s = e2e_server.steady_log_throughput(LOG, batch=3)
    # the first full-batch line (2.56: prefill inside its interval) and the 2-request line are left out
    assert s == {"log_tok_per_s": 200.0, "log_accept_len": 2.0, "log_lines": 3}
    assert e2e_server.kv_bytes_from_log(LOG) == {"kv_pool_tokens": 4096, "kv_bytes_per_token_log": 152.0,
                                                 "hot_ring_gb": 0.001}
    stock = "[x] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2097152, K size: 8.00 GB, V size: 8.00 GB"
    assert e2e_server.kv_bytes_from_log(stock)["kv_bytes_per_token_log"] == pytest.approx(8192)
    assert e2e_server.steady_log_throughput("nothing", 3)["log_tok_per_s"] is None


def test_round_phase_parsing_reads_the_phase_timer_lines(caplog):
    """The parser reads what sgl_spec/speculative/phase_timer.py logs (a format change must fail here, not on the GPU)."""
    import logging

    from sgl_spec.speculative import phase_timer

    timer = phase_timer.PhaseTimer(every=2, cuda=False)
    with caplog.at_level(logging.INFO, logger=phase_timer.__name__):
        for bs in (3, 3, 4, 4, 4, 4, 4, 4):
            timer.start(bs)
            for name in ("pages", "draft", "verify", "accept"):
                timer.mark(name)
            timer.end()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert text.count("quantspec timing:") == 4
    got = e2e_server.steady_round_phases(text, batch=4)["round_phases"]
    assert got["timing_lines"] == 2  # 3 lines at bs 4.0, the first dropped; the bs-3 line is another cell's
    assert {"host_pages_ms", "host_draft_ms", "host_verify_ms", "host_accept_ms", "host_outside_ms",
            "round_wall_ms"} <= set(got)
    assert all(v >= 0 for v in got.values())
    line = ("[x] quantspec timing: 20 rounds, bs 64.0 | host ms pages 0.10 draft 0.41 | gpu ms pages 0.05 draft 1.02 "
            "verify 2.10 | round wall ms 3.90")
    two = e2e_server.steady_round_phases(line + "\n" + line.replace("3.90", "4.10"), batch=64)["round_phases"]
    assert two == {"timing_lines": 1, "round_wall_ms": 4.10, "host_pages_ms": 0.10, "host_draft_ms": 0.41,
                   "gpu_pages_ms": 0.05, "gpu_draft_ms": 1.02, "gpu_verify_ms": 2.10}
    assert e2e_server.steady_round_phases("nothing", 4) == {}


def test_kv_bytes_formula_pycode_shape():
    cfg = {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 8, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 8192}
    assert e2e_server.kv_bytes_formula(cfg, quant=False) == 2 * 8 * 2 * 128 * 2
    assert e2e_server.kv_bytes_formula(cfg, quant=True) == pytest.approx((8.5 + 8.25) * 2 * 128 / 8 * 8)


def test_gpu_server_args_fit_the_grid():
    args = e2e_server.gpu_args(max_ctx=15360, gen=512, gamma=6, max_batch=128, dummy=False, chunk=16384,
                               mem_fraction=0.85)
    val = lambda flag: args[args.index(flag) + 1]  # noqa: E731
    assert int(val("--context-length")) >= 15360 + 512 + 7 and int(val("--context-length")) <= 16384
    assert int(val("--cuda-graph-max-bs-decode")) >= 128 and int(val("--max-running-requests")) >= 128
    assert "--skip-tokenizer-init" in args and "--incremental-streaming-output" in args
    assert "--load-format" not in args
    assert e2e_server.gpu_args(max_ctx=65536, gen=256, gamma=4, max_batch=8, dummy=True, chunk=8192,
                               mem_fraction=0.85)[-2:] == ["--load-format", "dummy"]
    assert e2e_server.mode_args("spec-topk", 3) == ["--spec-algo", "quantspec", "--quantspec-speculate", "always",
                                                    "--speculative-num-steps", "3"]
    assert e2e_server.mode_args("spec-auto", 3) == ["--spec-algo", "quantspec", "--quantspec-speculate", "auto",
                                                  "--speculative-num-steps", "3"]
    assert e2e_server.mode_args("bf16", 3) == []


def test_context_length_stays_within_the_models_positions(tmp_path):
    """SmolLM2 (8192 positions) at 7680 + 448: rounding up would ask 9216, which SGLang refuses; too long a grid is
    an error naming what to lower."""
    assert e2e_server.context_length(7680, 448, 9) == 9216
    assert e2e_server.context_length(7680, 448, 9, max_positions=8192) == 8192
    assert e2e_server.context_length(4096, 256, 4, max_positions=8192) == 5120
    with pytest.raises(ValueError, match="exceed the model's 8192 positions"):
        e2e_server.context_length(8000, 448, 9, max_positions=8192)
    args = e2e_server.gpu_args(max_ctx=7680, gen=448, gamma=9, max_batch=32, dummy=False, chunk=16384,
                               mem_fraction=0.85, max_pos=8192)
    assert args[args.index("--context-length") + 1] == "8192"
    (tmp_path / "config.json").write_text('{"max_position_embeddings": 8192}')
    assert e2e_server.max_positions(tmp_path) == 8192 and e2e_server.max_positions(tmp_path / "none") is None


def test_warmup_waves_cover_every_batch_size_of_the_grid():
    import bench_e2e

    assert bench_e2e.warmup_waves([1, 8, 32], [7680], 7680) == [(7680, 1), (7680, 8), (7680, 32)]
    assert bench_e2e.warmup_waves([32, 8, 8], [4096, 15360], 15360) == [(4096, 8), (4096, 32), (15360, 4)]
    assert bench_e2e.warmup_waves([1], [32768, 65536], 65536) == [(32768, 1), (65536, 1)]


def test_gpu_command_overlay_makes_the_tree_the_plugin(tmp_path):
    """The GPU server's PYTHONPATH: overlay (this tree as sgl-spec, with its SGLang entry point) first, then the
    site folder. Checked by asking a fresh interpreter with that path what it imports."""
    import subprocess

    site = tmp_path / "site"
    site.mkdir()
    cmd, env = common.server_command("cuda", "/m", 1234, ["--x"], site=site, overlay=True)
    assert cmd[1:5] == ["-m", "sglang.launch_server", "--model-path", "/m"] and cmd[-3:] == ["--port", "1234", "--x"]
    parts = env["PYTHONPATH"].split(":")
    assert parts[1] == str(site) and "TRITON_INTERPRET" not in env and env["HF_HUB_OFFLINE"] == "1"
    probe = ("import importlib.metadata as m, sgl_spec.speculative.cost_model, sgl_spec.kernels.select_topk_pages.ref as k; "
             "print([e.value for e in m.entry_points(group='sglang.srt.plugins') if e.name == 'quantspec']); "
             "print(sgl_spec.speculative.cost_model.__file__); print(k.__file__)")
    out = subprocess.run([sys.executable, "-c", probe], env={**env, "PYTHONPATH": parts[0]}, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "sgl_spec.plugin:register" in lines[0]
    assert lines[1].startswith(parts[0]) and lines[2].startswith(parts[0])


def test_dummy_model_config(tmp_path):
    d = e2e_server.write_dummy_model("llama3-8b-dummy", tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    assert (cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"]) == (32, 8, 128)
    assert cfg["max_position_embeddings"] >= 65536 + 256 + 64 and (d / "tokenizer.json").exists()


def test_python_prompts_exact_length_and_distinct_prefixes():
    corpus = PythonCorpus(TOKENIZER, min_tokens=20_000, root=Path(e2e_server.__file__).parents[1] / "sgl_spec")
    ps = corpus.prompts(17, 300, seed=3)
    assert len(ps) == 17 and all(len(p) == 300 for p in ps)
    assert len({p[0] for p in ps}) == 17  # distinct first tokens: not even one token of shared prefix
    assert ps == corpus.prompts(17, 300, seed=3) and ps != corpus.prompts(17, 300, seed=4)
    rp = random_prompts(5, 40, 8192, seed=1)
    assert len(rp) == 5 and all(len(p) == 40 and 1 <= min(p) and max(p) < 8192 for p in rp)
    assert len({p[0] for p in random_prompts(128, 8, 200, seed=2)}) == 128


def _row(mode, gamma, ctx, b, tps, tau=None):
    r = {"device": "H200", "model": "m", "mode": mode, "gamma": gamma, "ctx": ctx, "batch": b, "status": "ok",
         "tok_per_s": tps, "ctx_mid_window": ctx}
    if tau:
        r["accept_length"] = tau
    return r


def test_results_derive_speedups_alpha_and_gamma_choice():
    cfg = {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 8, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 8192}
    doc = {"rows": []}
    for ctx in (4096, 8192, 15360):
        for b in (1, 8, 32, 64):
            e2e_results.upsert(doc, _row("bf16", 0, ctx, b, 1000.0 * b))
            e2e_results.upsert(doc, _row("int8", 0, ctx, b, 1500.0 * b))
            e2e_results.upsert(doc, _row("spec-topk", 2, ctx, b, 1800.0 * b, tau=2.4))
            e2e_results.upsert(doc, _row("spec-topk", 4, ctx, b, 2000.0 * b, tau=3.4))
    e2e_results.upsert(doc, _row("bf16", 0, 4096, 1, 1000.0))  # a rerun replaces, never duplicates
    shared = [{**_row(m, 0, 4096, 1, t), "shared_prefix": True} for m, t in (("bf16", 500.0), ("int8", 1000.0))]
    for r in shared:  # a shared-prefix cell is its own cell: no collision, its own baseline
        e2e_results.upsert(doc, r)
    e2e_results.derive(doc, {"m": (cfg, 64)})
    assert len(doc["rows"]) == 50 and shared[1]["speedup"] == pytest.approx(2.0)
    assert "H200|m|shared-prefix" in doc["costmodel"]
    for x in doc["rows"]:  # no server-log rates in these rows: no log speedups
        assert x["log_speedup"] is None and x["log_baseline_tok_per_s"] is None
    logged = [{**_row(m, 0, 4096, 1, 1.0), "log_tok_per_s": t} for m, t in (("bf16", 50.0), ("int8", 80.0))]
    logged.append({**_row("spec-auto", 4, 4096, 1, 1.0), "log_tok_per_s": 120.0})
    e2e_results.log_speedups(logged)
    assert [x["log_speedup"] for x in logged] == pytest.approx([1.0, 1.6, 2.4])
    assert logged[2]["log_speedup_vs_int8"] == pytest.approx(1.5) and logged[2]["log_baseline_tok_per_s"] == 50.0
    r = next(x for x in doc["rows"] if x["mode"] == "spec-topk" and x["gamma"] == 4 and x["batch"] == 8)
    assert r["speedup"] == pytest.approx(2.0) and r["speedup_vs_int8"] == pytest.approx(2000 / 1500)
    assert r["baseline_tok_per_s"] == pytest.approx(8000)
    assert r["alpha"] == pytest.approx(e2e_results.cm.alpha_from_tokens(3.4, 4))
    assert r["t_step_ms"] == pytest.approx(1e3 * 8 * 3.4 / 16000)  # a round emits b·τ tokens
    assert r["predicted_speedup"] is not None and r["predicted_speedup"] > 0
    g = doc["gamma"]["H200|m|spec-topk"]
    assert doc["models"]["m"]["page_size"] == 64
    assert g["measured_best"] == 4 and g["common_cells"] == 12
    assert "H200|m" in doc["costmodel"] and len(doc["decisions"]) == 12
    bf = next(x for x in doc["rows"] if x["mode"] == "bf16" and not x.get("shared_prefix"))
    assert bf["speedup"] == 1.0 and bf["predicted_speedup"] is None
    assert e2e_results.done(doc, _row("int8", 0, 8192, 32, 0)) and not e2e_results.done(doc, _row("int8", 0, 1, 1, 0))


def test_smoke_run_end_to_end(tmp_path):
    """Two real CPU servers (stock torch_native, quantspec top-k speculation γ=2) on a tiny random Llama with Python
    prompts: every configuration must produce a steady-state window and a complete row."""
    import bench_e2e

    from sgl_spec.patches import installed_version

    out = tmp_path / "e2e"
    bench_e2e.main(["--smoke", "--ctx", "160", "--batch", "1,3", "--gen", "24", "--out", str(out), "--no-plot",
                    "--budget-s", "400"])
    doc = json.loads((out / "e2e.json").read_text())
    assert doc["meta"]["versions"]["torch"] and doc["meta"]["command"] and doc["meta"]["date"]
    rows = {(r["mode"], r["batch"]): r for r in doc["rows"]}
    assert set(rows) == {("bf16", 1), ("bf16", 3), ("spec-topk", 1), ("spec-topk", 3)}
    for (mode, b), r in rows.items():
        assert r["status"] == "ok", r
        assert r["tok_per_s"] > 0 and r["window_tokens"] > 0 and r["itl_p50_ms"] > 0
        assert r["kind"] == "e2e" and r["sglang"] == installed_version() and r["device"] == "cpu"
        assert r["cached_tokens_per_req"] == 0  # distinct prompts: no accidental prefix sharing
        assert r["speedup"] == pytest.approx(r["tok_per_s"] / rows[("bf16", b)]["tok_per_s"])
    for b in (1, 3):
        spec = rows[("spec-topk", b)]
        assert 1.0 <= spec["accept_length"] <= 3.0 and spec["gamma"] == 2
        assert spec["kv_bytes_per_token"] == pytest.approx(spec["kv_bytes_per_token_log"])  # 152 B: formula == pool
        assert rows[("bf16", b)]["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 4  # fp32 on CPU


def test_simulated_acceptance_rows_and_env_name():
    """--simulate-accept: spec rows are kind e2e_sim with alpha_sim and draft_weights; the stock row stays e2e; the
    environment names are the plugin's."""
    import types

    import bench_e2e

    from sgl_spec.kernels.engine import PREFILL_ENV
    from sgl_spec.speculative.accept import SIMULATE_ENV

    assert (e2e_server.SIMULATE_ENV, e2e_server.PREFILL_ENV) == (SIMULATE_ENV, PREFILL_ENV)
    a = types.SimpleNamespace(gen=8, temperature=0.0, shared_prefix=False, simulate_accept=0.9, extra="",
                              spec_extra="--quantspec-draft-weights int4")
    spec = bench_e2e._row_base(a, "H200", "llama3-8b-dummy", "spec-auto", 12, 32768, 1)
    stock = bench_e2e._row_base(a, "H200", "llama3-8b-dummy", "bf16", 0, 32768, 1)
    assert (spec["kind"], spec["alpha_sim"], spec["draft_weights"]) == ("e2e_sim", 0.9, "int4")
    assert (stock["kind"], stock["alpha_sim"], stock["draft_weights"]) == ("e2e", None, None)
    # a server configuration is a row of its own: int4 and model-weight drafts of one cell do not overwrite each other
    assert e2e_results.row_key(spec) != e2e_results.row_key({**spec, "draft_weights": "model"})
