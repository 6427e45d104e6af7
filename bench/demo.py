"""Client half of scripts/demo.sh: code completion against a running SGLang server, then a token-for-token
comparison of the speculative and the INT8-only runs.

    python bench/demo.py run --url http://127.0.0.1:PORT --pid PID --label quantspec --out spec.json
    python bench/demo.py compare spec.json int8.json

``run`` waits until the server answers /health_generate (failing early if process PID exits), sends one untimed
warm-up request, then the prompts one at a time (tok/s is single-request speed, prefill included), prints each
completion with its spec_accept_length and tok/s, and saves the outputs. ``compare`` exits 1 unless both runs
produced identical token ids. Needs only ``requests``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
import time
from pathlib import Path

import requests

MAX_NEW_TOKENS = 96


def prompts() -> list[tuple[str, str]]:
    """(name, prompt): short code-completion prompts and the first ~1.2k tokens of a real file (18 KV pages of 64
    tokens: the sparse draft reads 8 of them, the sink page and the top-scored ones)."""
    long_src = Path(sysconfig.get_paths()["stdlib"]) / "json" / "decoder.py"
    text = long_src.read_text()
    return [
        ("fibonacci", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'),
        ("walk", "import os\n\n\ndef list_python_files(root):\n    \"\"\"All .py files under root.\"\"\"\n"),
        ("stack", "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n"),
        (f"{long_src.parent.name}/{long_src.name} (long)", text[: text.index("def JSONObject")]),
    ]


def wait_ready(url: str, pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            sys.exit(f"demo: the server (pid {pid}) exited during startup; see its log")
        try:
            if requests.get(url + "/health_generate", timeout=30).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(1)
    sys.exit(f"demo: the server at {url} was not ready after {timeout:.0f}s")


def run(args) -> None:
    t0 = time.monotonic()
    wait_ready(args.url, args.pid, args.timeout)
    info = requests.get(args.url + "/server_info", timeout=60).json()
    mode = info.get("speculative_algorithm") or "none (INT8 KV only)"
    print(f"\n=== {args.label}: ready after {time.monotonic() - t0:.0f}s; speculative algorithm: {mode}")
    warm = {"text": "def f(x):\n", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
    requests.post(args.url + "/generate", json=warm, timeout=600).raise_for_status()  # first-request costs: untimed
    results, tokens, seconds = [], 0, 0.0
    for name, prompt in prompts():
        payload = {"text": prompt, "sampling_params": {"max_new_tokens": MAX_NEW_TOKENS, "temperature": 0}}
        start = time.perf_counter()
        resp = requests.post(args.url + "/generate", json=payload, timeout=600)
        elapsed = time.perf_counter() - start
        if resp.status_code != 200:
            sys.exit(f"demo: /generate -> {resp.status_code}: {resp.text[:500]}")
        out = resp.json()
        mi = out["meta_info"]
        n = mi["completion_tokens"]
        tokens, seconds = tokens + n, seconds + elapsed
        accept = (f"spec_accept_length {mi['spec_accept_length']:.2f} (tokens per verify round), "
                  if "spec_accept_length" in mi else "")
        print(f"\n--- {name}: {mi['prompt_tokens']} prompt tokens -> {n} new tokens, {accept}"
              f"{n / elapsed:.1f} tok/s")
        shown = prompt if len(prompt) < 300 else "[...]\n" + prompt[-200:]
        bold, plain = ("\033[1m", "\033[0m") if sys.stdout.isatty() else ("", "")
        print(f"{shown}{bold}{out['text']}{plain}")
        results.append({"name": name, "output_ids": out["output_ids"], "meta_info": mi, "seconds": elapsed})
    print(f"\n=== {args.label}: {tokens} tokens in {seconds:.1f}s = {tokens / seconds:.1f} tok/s (one request at a "
          f"time on this CPU, pure-torch attention; GPUs run the Triton kernels)")
    Path(args.out).write_text(json.dumps({"label": args.label, "results": results}))


def compare(args) -> None:
    a, b = (json.loads(Path(p).read_text()) for p in (args.first, args.second))
    bad = [x["name"] for x, y in zip(a["results"], b["results"]) if x["output_ids"] != y["output_ids"]]
    if bad or len(a["results"]) != len(b["results"]):
        sys.exit(f"demo: FAILED - {a['label']} and {b['label']} differ on: {', '.join(bad) or 'the prompt count'}")
    acc = [r["meta_info"]["spec_accept_length"] for r in a["results"] if "spec_accept_length" in r["meta_info"]]
    speed = [sum(len(r["output_ids"]) for r in x["results"]) / sum(r["seconds"] for r in x["results"]) for x in (a, b)]
    mean = f"mean spec_accept_length {sum(acc) / len(acc):.2f}; " if acc else ""
    print(f"\ndemo: OK - {a['label']} and {b['label']} produced identical tokens for all {len(a['results'])}"
          f" prompts; {mean}{a['label']} {speed[0]:.1f} tok/s vs {b['label']} {speed[1]:.1f} tok/s on this CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--url", required=True)
    r.add_argument("--pid", type=int, required=True, help="server process: fail fast if it dies during startup")
    r.add_argument("--label", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--timeout", type=float, default=300)
    c = sub.add_parser("compare")
    c.add_argument("first")
    c.add_argument("second")
    args = parser.parse_args()
    {"run": run, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    main()
