"""Client half of scripts/demo.sh: code completion (or, with ``--chat``, chat through the OpenAI API) against a
running SGLang server, then a comparison of the speculative and the INT8-only runs.

    python bench/demo.py run --url http://127.0.0.1:PORT --pid PID --label quantspec --out spec.json [--chat]
    python bench/demo.py compare spec.json int8.json

``run`` waits until the server answers /health_generate (failing early if process PID exits), sends one untimed
warm-up request, then the prompts one at a time (tok/s is single-request speed, prefill included), prints each
answer with its tok/s, and saves the outputs. Code completion goes through /generate (token ids, and each request's
spec_accept_length); ``--chat`` sends chat messages to /v1/chat/completions, where the server applies the model's
chat template, and reports the accept length of all requests from /v1/loads. ``compare`` exits 1 unless both runs
produced identical outputs (token ids; for chat, the answers' text and token counts). Needs only ``requests``.
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


def chat_prompts() -> list[tuple[str, list[dict]]]:
    """(name, messages): short questions and a ~1.2k-token document to summarize (Python's own documentation of the
    ``with`` statement and of context managers, from pydoc's topics, so it ships with every Python)."""
    from pydoc_data.topics import topics

    doc = topics["with"] + "\n" + topics["context-managers"]
    return [
        ("capital", [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]),
        ("python", [{"role": "user", "content": "Write a Python function that checks whether a string is a "
                                                "palindrome."}]),
        ("explain", [{"role": "system", "content": "You are a concise assistant."},
                     {"role": "user", "content": "Explain in two sentences why the sky is blue."}]),
        ("document (long)", [{"role": "user", "content": doc[:5200] + "\n\nSummarize the text above in three "
                                                                     "sentences."}]),
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
    if args.chat:
        return run_chat(args)
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


def run_chat(args) -> None:
    """The chat prompts through /v1/chat/completions, greedy; the accept length over all of them from /v1/loads."""
    bold, plain = ("\033[1m", "\033[0m") if sys.stdout.isatty() else ("", "")
    results, tokens, seconds = [], 0, 0.0
    for name, messages in chat_prompts():
        payload = {"model": "default", "messages": messages, "max_tokens": MAX_NEW_TOKENS, "temperature": 0}
        start = time.perf_counter()
        resp = requests.post(args.url + "/v1/chat/completions", json=payload, timeout=600)
        elapsed = time.perf_counter() - start
        if resp.status_code != 200:
            sys.exit(f"demo: /v1/chat/completions -> {resp.status_code}: {resp.text[:500]}")
        out = resp.json()
        answer, usage = out["choices"][0]["message"]["content"], out["usage"]
        n = usage["completion_tokens"]
        tokens, seconds = tokens + n, seconds + elapsed
        print(f"\n--- {name}: {usage['prompt_tokens']} prompt tokens -> {n} new tokens, {n / elapsed:.1f} tok/s")
        question = messages[-1]["content"]
        print("user: " + (question if len(question) < 300 else "[...]" + question[-160:]))
        print(f"assistant: {bold}{answer}{plain}")
        results.append({"name": name, "text": answer, "completion_tokens": n, "seconds": elapsed})
    spec = requests.get(args.url + "/v1/loads", timeout=60).json()
    spec = (spec.get("loads") or [{}])[0].get("speculative") if isinstance(spec, dict) else None
    accept = f"; spec accept length {spec['accept_length']:.2f} over all requests" if spec else ""
    print(f"\n=== {args.label}: {tokens} tokens in {seconds:.1f}s = {tokens / seconds:.1f} tok/s{accept}")
    Path(args.out).write_text(json.dumps({"label": args.label, "results": results,
                                          "accept_length": spec["accept_length"] if spec else None}))


def _same(x: dict, y: dict) -> bool:
    if "output_ids" in x:
        return x["output_ids"] == y["output_ids"]
    return (x["text"], x["completion_tokens"]) == (y["text"], y["completion_tokens"])


def _count(r: dict) -> int:
    return len(r["output_ids"]) if "output_ids" in r else r["completion_tokens"]


def compare(args) -> None:
    a, b = (json.loads(Path(p).read_text()) for p in (args.first, args.second))
    bad = [x["name"] for x, y in zip(a["results"], b["results"]) if not _same(x, y)]
    if bad or len(a["results"]) != len(b["results"]):
        sys.exit(f"demo: FAILED - {a['label']} and {b['label']} differ on: {', '.join(bad) or 'the prompt count'}")
    acc = [r["meta_info"]["spec_accept_length"] for r in a["results"] if "spec_accept_length" in r.get("meta_info", {})]
    speed = [sum(_count(r) for r in x["results"]) / sum(r["seconds"] for r in x["results"]) for x in (a, b)]
    mean = f"mean spec_accept_length {sum(acc) / len(acc):.2f}; " if acc else ""
    if a.get("accept_length"):
        mean = f"spec accept length {a['accept_length']:.2f}; "
    print(f"\ndemo: OK - {a['label']} and {b['label']} produced identical outputs for all {len(a['results'])}"
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
    r.add_argument("--chat", action="store_true", help="chat prompts through /v1/chat/completions")
    c = sub.add_parser("compare")
    c.add_argument("first")
    c.add_argument("second")
    args = parser.parse_args()
    {"run": run, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    main()
