"""bench_e2e.py's SGLang servers: modes, command lines, start/stop, and what the server log says.

Launch and teardown are bench/common.py's ``launch_server`` (the working tree as sgl-spec through an overlay on the
GPU, tests/support/harness.py's CPU setup for --smoke, own process group, killed as a group).

Server settings, and why (GPU):
* ``--context-length``: the longest prompt + generated tokens + a verify window + a page, rounded up to 1 Ki.
* ``--cuda-graph-max-bs-decode`` = the largest batch of the grid (every batch replays a decode graph) and
  ``--max-running-requests`` = that + 2: with exactly as many slots as requests, SGLang 0.5.17 leaves the last
  request queued behind a chunked prefill until the others finish (seen on CPU: one slot stays taken while a
  chunked request is re-admitted). quantspec sizes its per-slot hot rings from this; 2 more slots cost nothing.
* ``--chunked-prefill-size`` / ``--max-prefill-tokens``: 16 Ki for a small model (prefill of 128 × 15k prompts is
  most of a configuration's wall time), 8 Ki for an 8B model.
* ``--mem-fraction-static 0.85``; the KV pool capacity is read back from /server_info and a configuration that
  would not fit all its requests at once is skipped (else "batch" would silently be smaller).
* ``--disable-prefill-cuda-graph`` (prefill speed is not measured; saves ~45 s per start), ``--skip-tokenizer-init``
  and ``--incremental-streaming-output`` (token ids in, disjoint chunks out: no detokenization, no O(n²) streams),
  ``--decode-log-interval 10`` (enough "gen throughput" lines per configuration to cross-check the client).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from pathlib import Path

import requests

import common

REPO = common.REPO
# the plugin's benchmarking knobs, set in the servers' environment (the clients run without sgl_spec)
SIMULATE_ENV = "SGL_SPEC_SIMULATE_ACCEPT"  # sgl_spec/speculative/accept.py: keep each greedy draft with probability α
PREFILL_ENV = "SGL_SPEC_PREFILL"  # sgl_spec/kernels/engine.py: the EXTEND attention engine

MODES = {
    "bf16": {"args": [], "spec": False, "quant": False, "desc": "stock SGLang, default attention backend, BF16 KV"},
    "int8": {"args": ["--attention-backend", "quantspec"], "spec": False, "quant": True,
             "desc": "quantspec INT8 KV, no speculation"},
    # The raw speculative modes speculate every step (--quantspec-speculate always): what speculation itself gives.
    "spec-dense": {"args": ["--spec-algo", "quantspec", "--quantspec-dense-draft", "--quantspec-speculate", "always"],
                   "spec": True, "quant": True, "desc": "quantspec speculation every step, dense 4-bit draft"},
    "spec-topk": {"args": ["--spec-algo", "quantspec", "--quantspec-speculate", "always"], "spec": True,
                  "quant": True, "desc": "quantspec speculation every step, top-k sparse 4-bit draft"},
    # The default server: top-k draft, plain INT8 steps where the cost model says speculation loses.
    "spec-auto": {"args": ["--spec-algo", "quantspec", "--quantspec-speculate", "auto"], "spec": True, "quant": True,
                  "desc": "quantspec auto-off: top-k draft, plain INT8 steps where speculation would lose"},
}

LLAMA3_8B = {  # Llama-3-8B's shape; max positions raised so 64k contexts fit (random weights: no RoPE claims)
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 128256, "max_position_embeddings": 131072, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
    "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 128000, "eos_token_id": 128001,
    "torch_dtype": "bfloat16", "attention_bias": False, "mlp_bias": False,
}
QWEN3_8B = {  # Qwen3-8B's shape (per-head qk-norm, 36 layers, group 4); max positions raised as above
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151936, "max_position_embeddings": 131072, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
    "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 151643, "eos_token_id": 151645,
    "torch_dtype": "bfloat16", "attention_bias": False,
}
TINY_DUMMY = {**LLAMA3_8B, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 8192,
              "max_position_embeddings": 2048, "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": "float32"}
BUILTIN_DUMMY = {"llama3-8b-dummy": LLAMA3_8B, "qwen3-8b-dummy": QWEN3_8B, "tiny-dummy": TINY_DUMMY}


def write_dummy_model(name: str, out_dir) -> Path:
    """A config-only checkpoint for ``--load-format dummy`` (+ the repo's tokenizer files, never used with
    --skip-tokenizer-init but some code paths look for them)."""
    d = Path(out_dir) / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(BUILTIN_DUMMY[name], indent=1))
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(REPO / "tests" / "assets" / "tokenizer" / f, d / f)
    return d


def model_config(model_dir) -> dict:
    return json.loads((Path(model_dir) / "config.json").read_text())


def flag_value(args: list, name: str, default=None):
    """The value ``args`` (a server argument list) gives flag ``name`` (``--name v`` or ``--name=v``), else default."""
    for i, x in enumerate(args):
        if x == name and i + 1 < len(args):
            return args[i + 1]
        if x.startswith(name + "="):
            return x.split("=", 1)[1]
    return default


def prefill_engine() -> str:
    """The EXTEND engine the quantspec servers this process launches take."""
    return os.environ.get(PREFILL_ENV, "default")


def mode_args(mode: str, gamma: int) -> list[str]:
    args = list(MODES[mode]["args"])
    if MODES[mode]["spec"]:
        args += ["--speculative-num-steps", str(gamma)]
    return args


def context_length(max_ctx: int, gen: int, gamma: int, page: int = 64, max_positions: int | None = None) -> int:
    """Rounded up to 1 Ki, but never past the model's ``max_position_embeddings`` (SGLang refuses a longer one)."""
    need = max_ctx + gen + gamma + 1 + page
    rounded = -(-need // 1024) * 1024
    if max_positions is None or rounded <= max_positions:
        return rounded
    if need - page > max_positions:
        raise ValueError(f"{max_ctx} prompt + {gen} generated + {gamma + 1} verify tokens exceed the model's "
                         f"{max_positions} positions: lower the context or --gen")
    return max_positions


def max_positions(model_dir) -> int | None:
    """The model's ``max_position_embeddings`` (config.json), None for a built-in shape without one."""
    cfg = Path(model_dir) / "config.json"
    return json.loads(cfg.read_text()).get("max_position_embeddings") if cfg.is_file() else None


def gpu_args(*, max_ctx, gen, gamma, max_batch, dummy, chunk, mem_fraction, max_pos=None) -> list[str]:
    args = ["--context-length", str(context_length(max_ctx, gen, gamma, max_positions=max_pos)),
            "--max-running-requests", str(max_batch + 2), "--cuda-graph-max-bs-decode", str(max(max_batch, 1)),
            "--chunked-prefill-size", str(chunk), "--max-prefill-tokens", str(chunk),
            "--mem-fraction-static", str(mem_fraction), "--disable-prefill-cuda-graph",
            "--skip-tokenizer-init", "--incremental-streaming-output", "--decode-log-interval", "10",
            "--random-seed", "0"]
    return args + (["--load-format", "dummy"] if dummy else [])


def cpu_args(*, max_ctx, gen, gamma, max_batch, dummy, quant, max_pos=None) -> list[str]:
    """On top of harness.DEFAULT_ARGS (torch_native, 4096-token pool, 16 slots, no warmup)."""
    args = ["--dtype", "float32", "--context-length", str(context_length(max_ctx, gen, gamma, 32, max_pos)),
            "--max-running-requests", str(max_batch + 2), "--chunked-prefill-size", "256",
            "--skip-tokenizer-init", "--incremental-streaming-output", "--decode-log-interval", "2"]
    if quant:  # several pages per prompt at smoke lengths, and a real top-k choice among them
        args += ["--page-size", "32"]
    return args + (["--load-format", "dummy"] if dummy else [])


class BenchServer:
    """One running server; ``log_since(offset)`` reads the log written after ``offset`` (a configuration's part)."""

    def __init__(self, proc, port, log_path, startup_s):
        self.proc, self.port, self.log_path, self.startup_s = proc, port, Path(log_path), startup_s
        self.url = f"http://127.0.0.1:{port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def log_since(self, offset: int = 0) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def info(self) -> dict:
        r = requests.get(self.url + "/server_info", timeout=60)
        r.raise_for_status()
        return r.json()

    def flush_cache(self, tries: int = 30) -> None:
        """The scheduler refuses while it still holds a finished request for a moment: retry."""
        for _ in range(tries):
            if requests.post(self.url + "/flush_cache", timeout=60).status_code == 200:
                return
            time.sleep(0.5)
        raise RuntimeError("/flush_cache kept failing")


@contextlib.contextmanager
def launch(args: list[str], *, device: str, log_dir, model_dir, timeout: float = 900, site="/tmp/site",
           overlay: bool = True):
    """Start a server of ``model_dir`` with ``args`` (bench/common.py: overlay, process group, readiness), yield a
    BenchServer, kill its process group."""
    with common.launch_server(device, model_dir, args, log_dir, timeout=timeout, site=site,
                              overlay=overlay) as (proc, port, log_path, startup_s):
        yield BenchServer(proc, port, log_path, startup_s)


# ---- the log ---------------------------------------------------------------------------------------------------------
_DECODE = re.compile(r"Decode batch.*?#running-req:\s*(\d+).*?gen throughput \(token/s\):\s*([0-9.]+),\s*"
                     r"#queue-req:\s*(\d+)")
_ACCEPT = re.compile(r"accept len:\s*([0-9.]+)")
_QS_KV = re.compile(r"quantspec KV cache allocated: #tokens (\d+), pages ([0-9.]+) GB \(([0-9.]+) bytes/token.*?"
                    r"hot rings ([0-9.]+) GB")
_SGL_KV = re.compile(r"KV Cache is allocated\. dtype: (\S+), #tokens: (\d+), K size: ([0-9.]+) GB, "
                     r"V size: ([0-9.]+) GB")


def decode_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        m = _DECODE.search(line)
        if m:
            a = _ACCEPT.search(line)
            out.append({"running": int(m.group(1)), "gen_tps": float(m.group(2)), "queue": int(m.group(3)),
                        "accept_len": float(a.group(1)) if a else None})
    return out


def _median(xs):
    return sorted(xs)[len(xs) // 2]


def steady_log_throughput(text: str, batch: int) -> dict:
    """Median "gen throughput" over the log lines where the whole batch decodes and nothing waits, dropping the
    first such line (its interval still contains prefill work)."""
    lines = [d for d in decode_lines(text) if d["running"] == batch and d["queue"] == 0][1:]
    if not lines:
        return {"log_tok_per_s": None, "log_accept_len": None, "log_lines": 0}
    acc = [d["accept_len"] for d in lines if d["accept_len"] is not None]
    return {"log_tok_per_s": _median([d["gen_tps"] for d in lines]), "log_accept_len": _median(acc) if acc else None,
            "log_lines": len(lines)}


_TIMING = re.compile(r"quantspec timing: (\d+) rounds, bs ([0-9.]+) \| host ms (.*?) \| gpu ms (.*?) \| "
                     r"round wall ms ([0-9.]+)")


def _phases(text: str) -> dict:
    """ "draft 0.41 verify 0.35" -> {"draft": 0.41, "verify": 0.35} (phase names may contain spaces)."""
    toks, out, name = text.split(), {}, []
    for t in toks:
        try:
            out[" ".join(name)] = float(t)
            name = []
        except ValueError:
            name.append(t)
    return out


def steady_round_phases(text: str, batch: int) -> dict:
    """Median per-phase times of the ``SGL_SPEC_TIMING`` lines (sgl_spec/speculative/phase_timer.py) logged while the whole batch
    ran (mean batch size == batch), the first such line dropped (its rounds include the batch's first ones); {} when
    the server logged none (the knob unset, or too few rounds)."""
    lines = []
    for m in _TIMING.finditer(text):
        if abs(float(m.group(2)) - batch) < 1e-6:
            lines.append({"rounds": int(m.group(1)), "host": _phases(m.group(3)), "gpu": _phases(m.group(4)),
                          "wall": float(m.group(5))})
    lines = lines[1:]
    if not lines:
        return {}
    out = {"timing_lines": len(lines), "round_wall_ms": _median([d["wall"] for d in lines])}
    for kind in ("host", "gpu"):
        for k in sorted({k for d in lines for k in d[kind]}):
            out[f"{kind}_{k.replace(' ', '_')}_ms"] = _median([d[kind].get(k, 0.0) for d in lines])
    return {"round_phases": out}


_COMPILE = re.compile(r"Triton kernel '([^']+)' took ([0-9.]+) s to compile after serving started")


def serving_compiles(text: str) -> list[list]:
    """[kernel, seconds] for each Triton compilation SGLang logged after the server was up (SGLang 0.5.23 reports
    them): a first use inside a measured cell that the warm-up did not cover."""
    return [[m.group(1), float(m.group(2))] for m in _COMPILE.finditer(text)]


def kv_bytes_from_log(text: str) -> dict:
    """Bytes per token of the KV pool as the server logged it (quantspec's pool line, or SGLang's K/V sizes, which
    are rounded to 0.01 GB: only a cross-check of the formula)."""
    m = _QS_KV.search(text)
    if m:
        return {"kv_pool_tokens": int(m.group(1)), "kv_bytes_per_token_log": float(m.group(3)),
                "hot_ring_gb": float(m.group(4))}
    m = _SGL_KV.search(text)
    if m:
        n = int(m.group(2))
        return {"kv_pool_tokens": n, "kv_bytes_per_token_log": (float(m.group(3)) + float(m.group(4))) * 2**30 / n}
    return {}


def kv_bytes_formula(cfg: dict, quant: bool, page_size: int = 64, dtype_bytes: int = 2) -> float:
    """2·L·Hkv·D·2 bytes for a BF16 cache; the page store's INT4/INT4 + scales per token for quantspec."""
    from e2e_results import cm  # sgl_spec.speculative.cost_model, installed or from the repo

    shape = cm.ModelShape.from_hf_config(cfg, page_size=page_size, dtype_bytes=dtype_bytes)
    return shape.quant_bytes_per_token(draft=False) if quant else shape.bf16_bytes_per_token()
