#!/usr/bin/env python
"""Load hygiene: many mixed requests against one quantspec server, then the KV pool must be exactly where it
started.

The requests (``mixed_jobs``): prompt lengths from 1 token to ``--max-prompt`` (across page boundaries), a third of
them extending a few shared prefixes (radix-cache hits), greedy and sampled, plain and streaming; one in ten is
dropped by the client after two streamed chunks (SGLang aborts it) and one in ten is aborted by rid through
/abort_request while it runs. ``--concurrency`` of them are in flight at once. The server runs with
``SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE=1`` (SGLang's idle-time pool invariants raise instead of warning).

Free KV tokens are read from /v1/loads after /flush_cache (``max_total_num_tokens - num_used_tokens``: the pool
allocator's free whole pages once the radix cache is empty), before and after; one JSON row (kind "load") records
both, the errors, and the finish reasons.

  python bench/bench_load.py --model pycode-30m=/path/to/pycode-30m --requests 1000 --concurrency 64   # GPU
  python bench/bench_load.py --smoke                                             # CPU: tiny random Llama
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shlex
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

import common
import e2e_server
import e2e_setup

REPO = common.REPO


def mixed_jobs(n: int, max_prompt: int, vocab: int, seed: int = 0, max_new: int = 12, long_new: int = 400,
               page: int = 32) -> list[tuple[str, dict]]:
    """``n`` (kind, payload) jobs; kind: plain, stream, drop (closed by the client) or abort (/abort_request)."""
    rng = random.Random(seed)
    ids = lambda k: [rng.randrange(1, vocab) for _ in range(k)]  # noqa: E731
    bases = [ids(rng.randint(1, max(1, max_prompt // 2))) for _ in range(4)]  # shared prefixes: radix hits
    edges = sorted({1, 5, page - 1, page, page + 1, 2 * page - 1, 2 * page, 2 * page + 1, max_prompt})
    jobs = []
    for i in range(n):
        if i % 3 == 0:
            base = rng.choice(bases)
            prompt = base + ids(rng.randint(1, max(1, max_prompt - len(base))))
        elif i % 3 == 1:
            prompt = ids(rng.choice([e for e in edges if e <= max_prompt]))
        else:
            prompt = ids(rng.randint(1, max_prompt))
        sp = {"max_new_tokens": rng.randrange(1, max_new + 1), "ignore_eos": True}
        sp.update(temperature=0.8, top_p=0.9) if i % 2 else sp.update(temperature=0.0)
        payload = {"input_ids": prompt, "sampling_params": sp}
        long = {**sp, "max_new_tokens": long_new}
        if i % 10 == 3:
            jobs.append(("drop", {**payload, "sampling_params": long}))
        elif i % 10 == 7:
            rid = uuid.UUID(int=rng.getrandbits(128)).hex
            jobs.append(("abort", {**payload, "rid": rid, "sampling_params": long}))
        elif i % 4 == 1:
            jobs.append(("stream", {**payload, "stream": True}))
        else:
            jobs.append(("plain", {**payload, "return_logprob": i % 5 == 0}))
    return jobs


def run_job(url: str, job, timeout: float = 600) -> str:
    """Send one job; returns its finish reason ("length", "abort", ...) or "dropped"; raises on an HTTP error."""
    kind, payload = job
    if kind == "plain":
        r = requests.post(url + "/generate", json=payload, timeout=timeout)
        r.raise_for_status()
        return r.json()["meta_info"]["finish_reason"]["type"]
    if kind in ("stream", "drop"):
        with requests.post(url + "/generate", json={**payload, "stream": True}, stream=True, timeout=timeout) as r:
            r.raise_for_status()
            last, seen = None, 0
            for line in r.iter_lines():
                if not line or not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
                    continue
                seen += 1
                last = line
                if kind == "drop" and seen >= 2:
                    return "dropped"  # closing the connection makes SGLang abort the request
            return json.loads(last[5:])["meta_info"]["finish_reason"]["type"]
    if kind == "abort":
        result = {}
        t = threading.Thread(target=lambda: result.update(r=requests.post(url + "/generate", json=payload,
                                                                         timeout=timeout)))
        t.start()
        time.sleep(0.3)
        requests.post(url + "/abort_request", json={"rid": payload["rid"]}, timeout=60).raise_for_status()
        t.join(timeout)
        result["r"].raise_for_status()
        return result["r"].json()["meta_info"]["finish_reason"]["type"]
    raise ValueError(kind)


def free_tokens(srv, timeout: float = 120) -> int:
    """Free KV tokens while idle with an empty radix cache."""
    deadline = time.monotonic() + timeout
    while True:
        srv.flush_cache()
        poked = time.time()
        load = requests.get(srv.url + "/v1/loads", timeout=60).json()["loads"][0]
        while load["timestamp"] <= poked and time.monotonic() < deadline:
            time.sleep(0.2)
            load = requests.get(srv.url + "/v1/loads", timeout=60).json()["loads"][0]
        if load["num_running_reqs"] == 0 or time.monotonic() > deadline:
            return load["max_total_num_tokens"] - load["num_used_tokens"]
        time.sleep(0.5)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="NAME=PATH or a built-in dummy (llama3-8b-dummy, qwen3-8b-dummy)")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-prompt", type=int, default=15360, help="longest prompt (tokens)")
    ap.add_argument("--max-new", type=int, default=64, help="most new tokens of a request that runs to its end")
    ap.add_argument("--args", default="--spec-algo quantspec", help="server arguments, one shell-quoted string")
    ap.add_argument("--mem-fraction", type=float, default=0.85)
    ap.add_argument("--site", default="/tmp/site")
    ap.add_argument("--out", type=Path, default=None, help="JSON (default bench/results/load_<model>.json)")
    ap.add_argument("--smoke", action="store_true", help="CPU: tiny random Llama, 40 requests")
    a = ap.parse_args(argv)
    device = "cpu" if a.smoke else "cuda"
    if a.smoke:
        work = Path(a.out).parent if a.out else Path("/tmp/sgl_spec_load_smoke")
        a.requests, a.concurrency, a.max_prompt, a.max_new = min(a.requests, 40), min(a.concurrency, 4), 130, 12
        base = ["--dtype", "float32", "--page-size", "32", "--speculative-num-steps", "3", "--sleep-on-idle"]
    else:
        work = Path("/tmp/sgl_spec_load")
    name, path, dummy = e2e_setup.resolve_model(argparse.Namespace(smoke=a.smoke, model=a.model, out=work))
    if not a.smoke:
        base = ["--context-length", str(a.max_prompt + a.max_new + 512), "--max-running-requests",
                str(a.concurrency + 2), "--mem-fraction-static", str(a.mem_fraction), "--skip-tokenizer-init",
                "--sleep-on-idle"] + (["--load-format", "dummy"] if dummy else [])
    vocab = e2e_server.model_config(path)["vocab_size"]
    out = a.out or REPO / "bench" / "results" / f"load_{name}.json"
    args = base + shlex.split(a.args)
    jobs = mixed_jobs(a.requests, a.max_prompt, vocab, max_new=a.max_new)
    os.environ["SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE"] = "1"  # inherited by the server
    meta = common.run_meta(device, model=name, dummy=dummy, server_args=args)
    with e2e_server.launch(args, device=device, log_dir=Path(out).parent / "load_logs", model_dir=path,
                           site=a.site) as srv:
        version = srv.info().get("version")
        before = free_tokens(srv)
        errors, ends = [], []
        t0 = time.monotonic()

        def one(job):
            try:
                return run_job(srv.url, job)
            except Exception as e:  # noqa: BLE001 - every failure is counted and reported
                errors.append(f"{job[0]}: {type(e).__name__}: {e}"[:300])
                return "error"

        with ThreadPoolExecutor(a.concurrency) as ex:
            ends = list(ex.map(one, jobs))
        wall = time.monotonic() - t0
        after = free_tokens(srv)
        alive = srv.alive()
        leak = "memory leak" in srv.log_since(0)
    kinds = collections.Counter(k for k, _ in jobs)
    reasons = collections.Counter(f"{k}:{e}" for (k, _), e in zip(jobs, ends))
    row = {"kind": "load", "device": meta["device"], "model": name, "sglang": version, "requests": len(jobs),
           "concurrency": a.concurrency, "max_prompt": a.max_prompt, "jobs": dict(kinds),
           "finish_reasons": dict(reasons), "errors": len(errors), "error_samples": errors[:5],
           "free_tokens_before": before, "free_tokens_after": after, "pages_returned": before == after,
           "server_alive": alive, "leak_logged": leak, "wall_s": wall}
    common.write_json(out, {"meta": meta, "rows": [row]})
    print(f"[load] {len(jobs)} requests at concurrency {a.concurrency}: {len(errors)} errors, free KV tokens "
          f"{before} before, {after} after ({'equal' if before == after else 'DIFFERENT'}); {wall:.1f} s; {out}")
    return out


if __name__ == "__main__":
    main()
