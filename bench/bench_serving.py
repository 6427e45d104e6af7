#!/usr/bin/env python
"""Request-level benchmark with SGLang's own client: ``python -m sglang.bench_serving`` (not ours) against stock
SGLang and quantspec, one server per mode, the same requests for every mode.

For each configuration RATE:CONCURRENCY:PROMPTS of ``--configs`` the client sends PROMPTS requests at RATE
requests/s (``inf``: all at once) with at most CONCURRENCY in flight, ``--output-len`` new tokens each (ignore_eos),
and reports TTFT, TPOT, ITL and throughputs; one JSON row per (mode, configuration), the stock row's figures beside
quantspec's (``stock_*``). Prompts: real models get our own text (Python standard library files cut to ``--ctx``
tokens, lengths spread down to ``--min-ctx``) as bench_serving's ``custom`` JSONL dataset, so acceptance is that of
real text; built-in dummy models get ``random-ids`` prompts (random weights: acceptance meaningless, use
``--simulate-accept``).

  python bench/bench_serving.py --model pycode-30m=/path/to/pycode-30m --out bench/results    # GPU
  python bench/bench_serving.py --smoke                                      # CPU: tiny random Llama, the structure
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path

import common
import e2e_server
import e2e_setup

REPO = common.REPO
# bench_serving's result keys -> our row's
METRICS = {"median_ttft_ms": "ttft_p50_ms", "p99_ttft_ms": "ttft_p99_ms", "mean_ttft_ms": "ttft_mean_ms",
           "mean_tpot_ms": "tpot_ms", "median_tpot_ms": "tpot_p50_ms", "median_itl_ms": "itl_p50_ms",
           "p99_itl_ms": "itl_p99_ms", "output_throughput": "output_tok_per_s", "total_throughput": "total_tok_per_s",
           "completed": "completed", "duration": "duration_s", "mean_e2e_latency_ms": "e2e_latency_ms"}
STOCK_KEYS = ("ttft_p50_ms", "ttft_p99_ms", "tpot_ms", "itl_p50_ms", "output_tok_per_s", "total_tok_per_s")


def parse_configs(text: str) -> list[dict]:
    out = []
    for item in text.split(","):
        rate, conc, n = item.split(":")
        out.append({"request_rate": float(rate), "concurrency": int(conc), "num_prompts": int(n)})
    return out


def write_dataset(path: Path, tokenizer_dir: Path, n: int, ctx: int, min_ctx: int, seed: int = 0) -> Path:
    """bench_serving's ``custom`` JSONL: one conversation per prompt, the user turn our text of min_ctx…ctx tokens
    (the assistant turn is unused: --sharegpt-output-len fixes the output length)."""
    from e2e_prompts import PythonCorpus

    corpus = PythonCorpus(tokenizer_dir / "tokenizer.json", min_tokens=max(200_000, 4 * ctx))
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    rng = random.Random(seed)
    lines = []
    for i, ids in enumerate(corpus.prompts(n, ctx, seed=seed)):
        cut = rng.randint(min_ctx, ctx) if min_ctx < ctx else ctx
        text = tok.decode(ids[:cut])
        lines.append(json.dumps({"conversations": [{"from": "human", "value": text}, {"from": "gpt", "value": "ok"}]}))
    path.write_text("\n".join(lines) + "\n")
    return path


def client_command(a, url: str, tokenizer: Path, cfg: dict, dataset: Path | None, out_file: Path) -> list[str]:
    cmd = [a.python, "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", url,
           "--tokenizer", str(tokenizer), "--num-prompts", str(cfg["num_prompts"]),
           "--request-rate", "inf" if cfg["request_rate"] == float("inf") else str(cfg["request_rate"]),
           "--max-concurrency", str(cfg["concurrency"]), "--output-file", str(out_file), "--disable-tqdm",
           "--seed", "0", "--warmup-requests", "1"]
    if dataset is not None:
        cmd += ["--dataset-name", "custom", "--dataset-path", str(dataset), "--sharegpt-output-len", str(a.output_len),
                "--sharegpt-context-len", str(a.ctx + a.output_len + 64)]
    else:
        cmd += ["--dataset-name", "random-ids", "--random-input-len", str(a.ctx), "--random-output-len",
                str(a.output_len), "--random-range-ratio", str(a.min_ctx / a.ctx)]
    return cmd


def client_env(device: str, site: str) -> dict:
    if device == "cpu":
        return common.support().server_env()  # the CPU shims (torchvision), as for the servers
    return common.gpu_env(site, overlay=False)


def run_client(a, url, tokenizer, cfg, dataset, work: Path) -> dict:
    out_file = work / f"bench_serving_{time.strftime('%H%M%S')}_{os.getpid()}.jsonl"
    cmd = client_command(a, url, tokenizer, cfg, dataset, out_file)
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=client_env(a.device, a.site), capture_output=True, text=True, timeout=a.client_timeout_s)
    if p.returncode != 0 or not out_file.exists():
        return {"status": "failed", "reason": (p.stdout + p.stderr)[-2000:], "client_command": shlex.join(cmd)}
    result = json.loads(out_file.read_text().strip().splitlines()[-1])
    row = {ours: result.get(theirs) for theirs, ours in METRICS.items()}
    failed = cfg["num_prompts"] - int(row["completed"] or 0)
    return {**row, "status": "ok" if failed == 0 else "incomplete", "failed_requests": failed,
            "client_wall_s": time.monotonic() - t0, "client_command": shlex.join(cmd)}


def server_args(a, mode: str, dummy: bool, max_pos: int | None = None) -> list[str]:
    spec = e2e_server.MODES[mode]
    if a.device == "cpu":
        base = e2e_server.cpu_args(max_ctx=a.ctx, gen=a.output_len, gamma=a.gamma or 4, max_batch=a.max_running,
                                   dummy=dummy, quant=spec["quant"], max_pos=max_pos)
    else:
        base = e2e_server.gpu_args(max_ctx=a.ctx, gen=a.output_len, gamma=a.gamma or 12, max_batch=a.max_running,
                                   dummy=dummy, chunk=a.chunk, mem_fraction=a.mem_fraction, max_pos=max_pos)
    base = [x for x in base if x != "--skip-tokenizer-init"]  # the client sends text
    args = list(spec["args"])
    if spec["spec"] and a.gamma:
        args += ["--speculative-num-steps", str(a.gamma)]
    extra = shlex.split(a.extra) + (shlex.split(a.spec_extra) if spec["quant"] else [])
    return base + args + extra


def _fmt(v, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def attach_stock(rows: list) -> None:
    """stock_* fields: the bf16 row of the same configuration."""
    key = lambda r: (r["model"], r["ctx"], r["request_rate"], r["concurrency"], r["num_prompts"])  # noqa: E731
    stock = {key(r): r for r in rows if r["mode"] == "bf16" and r.get("status") == "ok"}
    for r in rows:
        s = stock.get(key(r))
        for k in STOCK_KEYS:
            r["stock_" + k] = s.get(k) if s else None
        r["tpot_vs_stock"] = r["tpot_ms"] / s["tpot_ms"] if s and r.get("tpot_ms") and s.get("tpot_ms") else None
        r["ttft_vs_stock"] = (r["ttft_p50_ms"] / s["ttft_p50_ms"]
                              if s and r.get("ttft_p50_ms") and s.get("ttft_p50_ms") else None)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="NAME=PATH (real weights) or a built-in dummy (llama3-8b-dummy, qwen3-8b-dummy)")
    ap.add_argument("--modes", default="bf16,spec-auto", help=",".join(e2e_server.MODES))
    ap.add_argument("--configs", default="inf:8:32,inf:32:96,4:32:96", help="RATE:CONCURRENCY:PROMPTS, comma-separated")
    ap.add_argument("--ctx", type=int, default=15360, help="longest prompt (tokens)")
    ap.add_argument("--min-ctx", type=int, default=None, help="shortest prompt (default ctx / 2)")
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--gamma", type=int, default=None, help="--speculative-num-steps (default: the server's)")
    ap.add_argument("--max-running", type=int, default=64)
    ap.add_argument("--chunk", type=int, default=16384)
    ap.add_argument("--mem-fraction", type=float, default=0.85)
    ap.add_argument("--extra", default="", help="more arguments for every server")
    ap.add_argument("--spec-extra", default="", help="more arguments for the quantspec servers only")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false",
                    help="skip the unrecorded wave of the first configuration each server gets before measuring")
    ap.add_argument("--simulate-accept", type=float, default=None, help="random-weight models (SGL_SPEC_SIMULATE_ACCEPT)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--site", default="/tmp/site")
    ap.add_argument("--client-timeout-s", type=float, default=1800)
    ap.add_argument("--out", type=Path, default=None, help="results folder (default bench/results; --smoke: /tmp)")
    ap.add_argument("--smoke", action="store_true", help="CPU: tiny random Llama, 2 small configurations")
    a = ap.parse_args(argv)
    a.device = "cpu" if a.smoke else "cuda"
    if a.smoke:
        a.ctx, a.output_len, a.max_running = min(a.ctx, 160), min(a.output_len, 12), 4
        a.configs = "inf:2:3,2:2:3" if a.configs == ap.get_default("configs") else a.configs
    a.min_ctx = a.min_ctx or a.ctx // 2
    a.out = a.out or (Path("/tmp/sgl_spec_serving_smoke") if a.smoke else REPO / "bench" / "results")
    a.out.mkdir(parents=True, exist_ok=True)
    configs = parse_configs(a.configs)
    modes = a.modes.split(",")
    if set(modes) - set(e2e_server.MODES):
        ap.error(f"unknown --modes {sorted(set(modes) - set(e2e_server.MODES))}")
    if a.simulate_accept is not None:
        os.environ[e2e_server.SIMULATE_ENV] = str(a.simulate_accept)

    name, path, dummy = e2e_setup.resolve_model(a)
    work = a.out / "serving_logs"
    work.mkdir(exist_ok=True)
    n_max = max(c["num_prompts"] for c in configs) + 1  # + the warm-up request
    dataset = None if dummy else write_dataset(work / f"dataset_{name}_{a.ctx}.jsonl", path, n_max, a.ctx, a.min_ctx)
    meta = common.run_meta(a.device, model=name, dummy=dummy, ctx=a.ctx, min_ctx=a.min_ctx, output_len=a.output_len,
                           prompts="random token ids" if dummy else "Python standard library text (custom JSONL)",
                           client="python -m sglang.bench_serving")
    rows = []
    out_json = a.out / f"serving_{name}.json"
    for mode in modes:
        spec = e2e_server.MODES[mode]
        with e2e_server.launch(server_args(a, mode, dummy, e2e_server.max_positions(path)), device=a.device,
                               log_dir=work, model_dir=path, site=a.site) as srv:
            version = srv.info().get("version")
            if a.warmup:  # one unrecorded wave of the first configuration: JIT and allocator warm-up off the books
                first = configs[0]
                run_client(a, srv.url, path, {**first, "num_prompts": min(first["num_prompts"],
                                                                          first["concurrency"])}, dataset, work)
            for cfg in configs:
                r = run_client(a, srv.url, path, cfg, dataset, work)
                row = {"kind": "serving", "device": meta["device"], "model": name, "mode": mode, "ctx": a.ctx,
                       "min_ctx": a.min_ctx, "output_len": a.output_len, **cfg, "sglang": version,
                       "gamma": a.gamma if spec["spec"] else None,
                       "alpha_sim": a.simulate_accept if spec["spec"] else None,
                       "prefill_engine": e2e_server.prefill_engine() if spec["quant"] else None,
                       "server_startup_s": srv.startup_s, **r}
                rows.append(row)
                print(f"[serving] {mode:9s} rate {cfg['request_rate']:>4} conc {cfg['concurrency']:3d} "
                      f"n {cfg['num_prompts']:4d}: {row['status']} ttft p50 {_fmt(row.get('ttft_p50_ms'))} ms, tpot "
                      f"{_fmt(row.get('tpot_ms'), 2)} ms, out {_fmt(row.get('output_tok_per_s'))} tok/s", flush=True)
                attach_stock(rows)
                common.write_json(out_json, {"meta": meta, "rows": rows})
    print(f"[serving] wrote {out_json}")
    return out_json


if __name__ == "__main__":
    main()
