"""bench_e2e.py's load: ``batch`` concurrent streaming /generate requests, and the steady-state decode window.

Every request is in flight at once (batch = requests in flight): client processes (forked, so the prompts are not
pickled) each run one thread per request; all threads send at the same agreed wall-clock instant. Each streamed
chunk (``--incremental-streaming-output``: disjoint token ids) is recorded as (server send time
``meta_info.response_sent_to_client_ts`` when present else client receive time, tokens in the chunk).

The window (``window_metrics``) runs from the moment every request has its first ``skip`` decode tokens (all prefills
done, first-use kernel compilations behind us) to the moment the first request finishes. In it:
* tok/s = tokens delivered to all requests inside the window / window length;
* per-token ITL: every chunk gap g that delivered n tokens contributes n samples of g/n (speculation delivers
  bursts: a chunk gap is a round); p50/p90 of those, and p50/p90 of the raw chunk gaps;
* accept length τ = Σ (completion_tokens − 1) / Σ spec_verify_ct over the requests (the prefill emits the first
  token; every other token comes from a verify round), from each request's final meta_info.
"""
from __future__ import annotations

import http.client
import json
import math
import multiprocessing as mp
import threading
import time
from urllib.parse import urlparse


def _stream_one(url: str, payload: dict, start_at: float, timeout: float) -> dict:
    u = urlparse(url)
    events, meta, err = [], {}, None
    while time.time() < start_at:
        time.sleep(min(0.01, max(0.0, start_at - time.time())))
    t_send = time.time()
    try:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        conn.request("POST", "/generate", body=json.dumps(payload), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return {"t_send": t_send, "events": [], "meta": {}, "error": f"HTTP {resp.status}: {resp.read()[:500]!r}"}
        while True:
            line = resp.readline()
            if not line:
                break
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            t_recv = time.time()
            chunk = json.loads(data)
            if "error" in chunk:
                err = str(chunk["error"])[:500]
                break
            meta = chunk.get("meta_info", meta)
            n = len(chunk.get("output_ids") or [])
            events.append((meta.get("response_sent_to_client_ts") or t_recv, t_recv, n))
        conn.close()
    except Exception as exc:  # a failed request fails its configuration, never the benchmark
        err = f"{type(exc).__name__}: {exc}"
    return {"t_send": t_send, "events": events, "meta": meta, "error": err}


def _worker(url, jobs, start_at, timeout, queue):
    out = {}

    def run(i, payload):
        out[i] = _stream_one(url, payload, start_at, timeout)

    threads = [threading.Thread(target=run, args=job, daemon=True) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put(out)


def run_batch(url: str, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 0.0,
              timeout: float = 600, procs: int = 1, lead_s: float = 1.0) -> list[dict]:
    """Send every prompt at once (streaming, ignore_eos) and return one trace per request, in prompt order."""
    sp = {"max_new_tokens": max_new_tokens, "temperature": temperature, "ignore_eos": True}
    jobs = [(i, {"input_ids": p, "sampling_params": sp, "stream": True}) for i, p in enumerate(prompts)]
    procs = max(1, min(procs, len(jobs)))
    start_at = time.time() + lead_s * (1 if procs == 1 else 2)
    if procs == 1:
        q = _ListQueue()
        _worker(url, jobs, start_at, timeout, q)
        parts = q.items
    else:
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        ps = [ctx.Process(target=_worker, args=(url, jobs[k::procs], start_at, timeout, q), daemon=True)
              for k in range(procs)]
        for p in ps:
            p.start()
        parts = [q.get(timeout=timeout + 60) for _ in ps]
        for p in ps:
            p.join(timeout=10)
    merged = {}
    for part in parts:
        merged.update(part)
    return [merged[i] for i in range(len(prompts))]


class _ListQueue:
    def __init__(self):
        self.items = []

    def put(self, x):
        self.items.append(x)


def _quantile(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _time_of_token(events, k):
    """Time at which a request had received at least ``k`` tokens (None if never)."""
    total = 0
    for t, _, n in events:
        total += n
        if total >= k:
            return t
    return None


def _count_by(events, t_end):
    return sum(n for t, _, n in events if t <= t_end)


def timeline(traces: list[dict], sent: float, t0: float, t1: float) -> dict:
    """Where a cell's time went, relative to ``sent``: the whole cell (``cell_s``: every prefill and every new token),
    the window's start (``decode_start_s``) and end (the first
    request done, ``first_done_s``), the time from there to the last request's end (``tail_s``), and the longest
    pause between two chunks of one request after its first token (``max_gap_s``, starting at ``max_gap_at_s``):
    a pause far above the chunk gap is a stall (a compilation, a host wait) that tok/s alone does not locate.
    Speculation adds a tail of its own: requests whose text drafts worse need more rounds for the same tokens, so
    the per-request accept lengths (``accept_length_min`` / ``_max``, and that of the request done last) say how
    much of ``tail_s`` is acceptance rather than a stall."""
    gap, at = 0.0, None
    for t in traces:
        ts = [e[0] for e in t["events"]]
        for a, b in zip(ts, ts[1:]):
            if b - a > gap:
                gap, at = b - a, a - sent
    end = max(t["events"][-1][0] for t in traces)
    out = {"cell_s": end - sent, "decode_start_s": t0 - sent, "first_done_s": t1 - sent, "tail_s": end - t1,
           "max_gap_s": gap, "max_gap_at_s": at}
    taus = [_request_accept_length(t) for t in traces]
    if all(x is not None for x in taus):
        last = max(range(len(traces)), key=lambda i: traces[i]["events"][-1][0])
        out.update(accept_length_min=min(taus), accept_length_max=max(taus), last_done_accept_length=taus[last])
    return out


def _request_accept_length(trace: dict):
    rounds = int(trace["meta"].get("spec_verify_ct") or 0)
    return (int(trace["meta"].get("completion_tokens") or 0) - 1) / rounds if rounds else None


def window_metrics(traces: list[dict], skip: int = 4, min_tokens: int = 8) -> dict:
    """Steady-state decode metrics of one batch (module docstring). ``skip``: decode tokens each request must have
    received before the window opens (plus the prefill's first token); ``min_tokens``: tokens per request the
    window must hold on average, else it is too short to mean anything (status "no_window")."""
    bad = [t["error"] for t in traces if t["error"] or not t["events"]]
    if bad:
        return {"status": "failed", "reason": f"{len(bad)} request(s) failed: {bad[0]}"}
    starts = [_time_of_token(t["events"], 1 + skip) for t in traces]
    if any(s is None for s in starts):
        return {"status": "no_window", "reason": f"a request produced fewer than {1 + skip} tokens"}
    t0, t1 = max(starts), min(t["events"][-1][0] for t in traces)
    sent = min(t["t_send"] for t in traces)
    # prefill_done_s: the last first token (every prefill done)
    out = {"prefill_done_s": max(_time_of_token(t["events"], 1) for t in traces) - sent,
           "ttft_p50_s": _quantile([_time_of_token(t["events"], 1) - t["t_send"] for t in traces], 0.5),
           **timeline(traces, sent, t0, t1)}
    if t1 <= t0:
        return {**out, "status": "no_window",
                "reason": "the first request finished before the last one was decoding (raise --gen)"}
    counts0 = [_count_by(t["events"], t0) for t in traces]
    counts1 = [_count_by(t["events"], t1) for t in traces]
    tokens = sum(counts1) - sum(counts0)
    window = t1 - t0
    if tokens < min_tokens * len(traces):
        return {**out, "status": "no_window", "window_tokens": tokens,
                "reason": f"{tokens / len(traces):.1f} tokens per request in the window (< {min_tokens}; raise --gen)"}
    per_token, gaps = [], []
    for t in traces:
        prev = None
        for ts, _, n in t["events"]:
            if prev is not None and t0 < ts <= t1 and n > 0:
                gaps.append(ts - prev)
                per_token += [(ts - prev) / n] * n
            prev = ts
    b = len(traces)
    rounds = sum(int(t["meta"].get("spec_verify_ct") or 0) for t in traces)
    emitted = sum(max(int(t["meta"].get("completion_tokens") or 0) - 1, 0) for t in traces)
    ms = lambda x: None if x is None else 1e3 * x  # noqa: E731
    return {
        **out, "status": "ok", "window_s": window, "window_tokens": tokens,
        "window_tokens_per_req": tokens / b, "tok_per_s": tokens / window,
        "itl_mean_ms": 1e3 * window * b / tokens if tokens else None,
        "itl_p50_ms": ms(_quantile(per_token, 0.5)), "itl_p90_ms": ms(_quantile(per_token, 0.9)),
        "chunk_gap_p50_ms": ms(_quantile(gaps, 0.5)), "chunk_gap_p90_ms": ms(_quantile(gaps, 0.9)),
        "accept_length": emitted / rounds if rounds else None,
        "generated_mid_window": (sum(counts0) + sum(counts1)) / (2 * b),
        "completion_tokens": sum(int(t["meta"].get("completion_tokens") or 0) for t in traces) / b,
        # prompt tokens served from the radix cache: ~0 unless --shared-prefix (then ctx - 64)
        "cached_tokens_per_req": sum(int(t["meta"].get("cached_tokens") or 0) for t in traces) / b,
    }
