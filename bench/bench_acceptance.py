#!/usr/bin/env python
"""Acceptance study: how well does each draft page policy predict the target, per γ?

For every configuration (draft policy × page ratio × γ) a real SGLang server with ``--spec-algo quantspec`` on
pycode-30m serves every prompt of bench/data/acceptance_prompts.json (20 starts of
long Python files, 4k-15k tokens, see bench/prompts.py) greedily, ``--max-new-tokens`` each. From the responses'
``meta_info`` (all prompts of a configuration pooled):

  alpha  per-token acceptance α (Leviathan et al. 2023, §3.1: the probability that a draft token is accepted given
         that the drafts before it were): accepted / (accepted + rejected) draft tokens, where a verify that accepted
         n < γ drafts rejected one (h[n], below) and one that accepted all γ rejected none. This is the maximum-
         likelihood α of the i.i.d. model behind τ = (1 - α^(γ+1)) / (1 - α), the model sgl_spec/speculative/cost_model.py uses;
         drafts after the first rejection are never judged, so they count neither way.
  keep   accepted / proposed draft tokens (spec_num_correct_drafts / spec_num_proposed_drafts): the share of the
         drafted tokens that end up in the output; it falls with γ at a fixed α (with α = 0.95 and γ = 8 it is 0.80),
         so it measures γ as much as the draft.
  tau    mean accept length, SGLang's definition: completion tokens / verify passes (spec_verify_ct; the first token
         comes from the prefill and counts, as in SGLang)
  pos    per-position acceptance from spec_correct_drafts_histogram (h[n] = verifies that accepted exactly n drafts):
         pos[i] = P(draft i accepted | drafts 1…i-1 accepted) = Σ_{n≥i} h[n] / Σ_{n≥i-1} h[n]
         reach[i] = P(n ≥ i)

Policies: dense (--quantspec-dense-draft: every page, upper 4-bit plane), streaming (sinks + newest pages), topk
(Collect-2-Query) with options topk[+r<share>][+ema<β>|+max] (recent pages, score smoothing), topk-head (the same,
one page list per kv head ranked by that head's own scores, same options), +lse on either (pages ranked by their
log-sum-exp of the score rows' logits instead of the max logit), topk-last (the last
accepted token's scores); all sparse ones get the same budget per layer, k = min(n, max(--min-pages, ceil(ratio·n)))
of the n complete pages, sink pages included (sgl_spec/pages/policies.py). Every configuration is lossless, so greedy
outputs must agree across configurations (bit-exact on the fp32 CPU smoke run; on bf16 GPUs a near-tie can flip
when γ or the batch changes the summation order): reported, not enforced.

Servers: with --per-request (default) one server per γ runs every streaming/topk* configuration, each request
naming its policy and ratio (sgl_spec/experimental/page_study.py); dense and topk-last get a server each. A launch costs ~60 s on
the H100 (measured: 55-65 s with 4 at once) against ~10-15 s of decoding per configuration, so this is what makes
the select grid (8 policies x 3 ratios x 4 γ) fit one command. Parallel servers get fixed ports below the ephemeral
range (acceptance_server.server_ports: SGLang's own distributed port pick raced, EADDRINUSE).

  python bench/bench_acceptance.py --device cuda --model /path/to/pycode-30m                 # bench/results
  python bench/bench_acceptance.py --device cuda --model /path/to/pycode-30m --grid select --out /tmp/select.json
  python bench/bench_acceptance.py --smoke                        # CPU, 2 prompts x 600 tokens, 2 servers, ~3 min

GPU time (H100): the quick grid takes ~4 min, the select grid ~4-7 min at --parallel 4. --time-budget-s starts no
launch later than that; finished rows are written after every launch.

Output: one printed line per configuration; bench/results/acceptance.json (device, versions, command, rows; with
--merge, rows of other configurations already in the file are kept) and acceptance.png (bench/plot_acceptance.py).
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import Optional
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import acceptance_server as srvlib  # noqa: E402
import common  # noqa: E402
import e2e_server  # noqa: E402
from acceptance_grid import (LABEL_KEY, SELECT_POLICIES, grid, jobs, label,  # noqa: E402,F401
                             page_score, policy_flags)
import prompts as prompt_set  # noqa: E402

REPO = srvlib.REPO
ALPHA_DEFINITION = ("alpha: per-token acceptance, accepted / (accepted + rejected) draft tokens (Leviathan et al. "
                    "2023; a verify accepting n < gamma drafts rejected one); keep_rate: accepted / proposed")
T0 = time.monotonic()
_LOCK = threading.Lock()


def log(msg):
    with _LOCK:
        print(msg, flush=True)


def parse_args(argv=None):
    floats = lambda s: [float(x) for x in s.split(",") if x]  # noqa: E731
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None, help="default <repo>/models/pycode-30m, else "
                    "<repo>/../shared/models/pycode-30m")
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cpu with --smoke, else cuda")
    ap.add_argument("--grid", choices=["quick", "full", "select"], default="quick", help=(
        "quick (default, 20 configs): γ=4 with every policy and ratio, plus γ=2,6,8 with dense and each sparse "
        "policy at the middle ratio; full (32): every policy × ratio × γ (topk-last at --last-ratios); select: "
        "every --policies entry (default SELECT_POLICIES: streaming and topk variants) × ratio × γ, dense per γ"))
    ap.add_argument("--policies", type=lambda s: s.split(","), default=None, help=(
        "dense, topk-last, streaming, or topk[-head][+r<share>][+ema<β>|+max][+lse] (topk-head: per-kv-head tables; "
        "+lse: log-sum-exp page scores; recent share, score smoothing: "
        "sgl_spec/pages/policies.py); default: dense,topk,streaming,topk-last (select grid: SELECT_POLICIES)"))
    ap.add_argument("--per-request", action=argparse.BooleanOptionalAction, default=True, help=(
        "one server per γ serves every streaming/topk* configuration, each request naming its policy and ratio "
        "(--quantspec-draft-pages per-request, sgl_spec/experimental/page_study.py); dense and topk-last get servers of their "
        "own. --no-per-request: one server per configuration (default: per-request)"))
    ap.add_argument("--ratios", type=floats, default=[0.03, 0.07, 0.15], help="topk and streaming budgets")
    ap.add_argument("--last-ratios", type=floats, default=[0.07], help="topk-last budgets")
    ap.add_argument("--gammas", type=ints, default=[2, 4, 6, 8])
    ap.add_argument("--min-pages", type=int, default=1, help="1: the ratio alone sets the budget (server default 8)")
    ap.add_argument("--sink-pages", type=int, default=1)
    ap.add_argument("--page-size", type=int, default=64)
    ap.add_argument("--prompts", type=Path, default=prompt_set.DEFAULT_OUT)
    ap.add_argument("--num-prompts", type=int, default=None, help="first N prompts (default all)")
    ap.add_argument("--cut", type=int, default=None, help="cut every prompt to this many tokens")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=None, help="requests in flight per server (default 8, "
                    "32 for a per-request server; CPU 2): acceptance is per request, batching only saves time")
    ap.add_argument("--parallel", type=int, default=None, help="servers running at once (default 4 on cuda, "
                    "2 for --smoke, else 1)")
    ap.add_argument("--cuda-graph", action="store_true", help="keep SGLang's decode CUDA graphs (slower startup)")
    ap.add_argument("--server-arg", action="append", default=[], help="extra server argument (repeatable, "
                    "e.g. --server-arg=--chunked-prefill-size=4096)")
    ap.add_argument("--python", default=sys.executable, help="python that runs the server (cuda)")
    ap.add_argument("--site", default="/tmp/site", help="SGLang's offline install on the GPU machine (cuda)")
    ap.add_argument("--time-budget-s", type=float, default=None, help="start no new configuration after this many "
                    "seconds (default 480 on cuda, none on cpu); finished rows are always written")
    ap.add_argument("--startup-timeout-s", type=float, default=600)
    ap.add_argument("--out", type=Path, default=None, help="JSON path (default bench/results/acceptance.json; "
                    "--smoke: /tmp/sgl_spec_acceptance/acceptance.json)")
    ap.add_argument("--merge", action="store_true", help="keep rows of other configurations already in --out")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="CPU: 2 prompts cut to 600 tokens, 16 new tokens, 3 configs")
    ap.add_argument("--rederive", type=Path, nargs="+", metavar="JSON", help=(
        "run nothing: recompute alpha / keep_rate of these results files from their counts (hist, drafts)"))
    a = ap.parse_args(argv)
    a.device = a.device or ("cpu" if a.smoke else "cuda")
    if a.smoke:
        a.num_prompts, a.cut, a.max_new_tokens = a.num_prompts or 2, a.cut or 600, 16
    a.model = a.model or next((p for p in (REPO / "models" / "pycode-30m", REPO.parent / "shared" / "models" /
                                           "pycode-30m") if p.is_dir()), REPO / "models" / "pycode-30m")
    a.shared_concurrency = a.concurrency or (4 if a.device == "cpu" else 32)  # a per-request server
    a.concurrency = a.concurrency or (2 if a.device == "cpu" else 8)
    a.policies = a.policies or (SELECT_POLICIES if a.grid == "select" else ["dense", "topk", "streaming", "topk-last"])
    # Servers at once: startup is mostly single-threaded Python and waiting, and the model is tiny (GPU: 4; the
    # 2-config CPU smoke: 2, ~20 s less on 2 cores; other CPU runs: 1).
    a.parallel = a.parallel or (4 if a.device == "cuda" else 2 if a.smoke else 1)
    a.model = a.model.resolve()  # the server runs in the log folder
    if a.time_budget_s is None and a.device == "cuda":
        a.time_budget_s = 480  # + one last wave of ~1 min stays under the GPU machine's 10 minutes per command
    a.out = a.out or (Path("/tmp/sgl_spec_acceptance/acceptance.json") if a.smoke
                      else REPO / "bench" / "results" / "acceptance.json")
    bad = [p for p in a.policies if policy_flags(p) is None]
    if bad:
        ap.error(f"unknown --policies {bad}")
    return a


def server_args(a, cfg, max_prompt, shared=False) -> list[str]:
    """A server for ``cfg``; ``shared``: the per-request server of cfg's γ (requests name policy and ratio)."""
    args = ["--page-size", a.page_size, "--spec-algo", "quantspec", "--speculative-num-steps", cfg["gamma"],
            "--quantspec-speculate", "always"]  # acceptance of every round: no auto-off plain steps
    flags = ["--quantspec-draft-pages", "per-request"] if shared else policy_flags(cfg["policy"])
    if shared and page_score(cfg) != "max":  # jobs() groups a per-request server's configurations by score kind
        flags += ["--quantspec-page-score", page_score(cfg)]
    if cfg["policy"] == "dense" and not shared:
        args += flags
    else:
        args += [*flags[:2], "--quantspec-topk-ratio", cfg["ratio"], "--quantspec-min-pages", a.min_pages,
                 "--quantspec-sink-pages", a.sink_pages, *flags[2:]]
    per_req = -(-(max_prompt + a.max_new_tokens + 2 * a.page_size) // a.page_size) * a.page_size
    # A fixed KV pool: several servers share the GPU, and SGLang would otherwise give the first one almost all of it.
    conc = a.shared_concurrency if shared else a.concurrency
    args += ["--max-total-tokens", max(4096, conc * per_req), "--context-length", max_prompt +
             a.max_new_tokens + 2 * a.page_size]
    if shared:
        args += ["--max-running-requests", conc + 2]  # the default (128) would work too; slots cost ring memory
    if a.device == "cpu":
        args += ["--dtype", "float32"]  # exact comparisons across configurations; bf16 matmuls are slow on CPU
    elif not a.cuda_graph:
        args += ["--disable-decode-cuda-graph"]  # acceptance does not depend on graphs; capture costs startup time
    return [str(x) for x in args] + list(a.server_arg)


def metrics(results, gamma) -> dict:
    """Pooled α, τ and per-position acceptance over the prompts' meta_info."""
    hist = [0] * (gamma + 1)
    verify = completion = correct = proposed = 0
    for r in results:
        mi = r["meta_info"]
        verify += mi.get("spec_verify_ct", 0)
        completion += mi["completion_tokens"]
        correct += mi.get("spec_num_correct_drafts", 0)
        proposed += mi.get("spec_num_proposed_drafts", 0)
        for n, c in enumerate(mi.get("spec_correct_drafts_histogram") or []):
            hist[min(n, gamma)] += c
    total = sum(hist)
    reach = [sum(hist[i:]) / total if total else None for i in range(gamma + 1)]
    pos = [reach[i] / reach[i - 1] if reach[i - 1] else None for i in range(1, gamma + 1)]
    return dict(alpha=alpha_mle(hist), keep_rate=keep_rate(correct, proposed),
                tau=completion / verify if verify else None, pos_accept=pos, reach=reach[1:], hist=hist,
                verify_ct=verify, completion_tokens=completion, correct_drafts=correct, proposed_drafts=proposed)


def alpha_mle(hist) -> Optional[float]:
    """Per-token α from the accepted-drafts histogram (h[n] = verifies that accepted exactly n of γ = len(h) - 1
    drafts): accepted / (accepted + rejected); every verify with n < γ rejected exactly one draft."""
    accepted = sum(n * h for n, h in enumerate(hist))
    judged = accepted + sum(hist[:-1])
    return accepted / judged if judged else None


def keep_rate(correct: int, proposed: int) -> Optional[float]:
    return correct / proposed if proposed else None


def rederive(path: Path) -> str:
    """Recompute the derived fields (alpha, keep_rate) of a results file from its counted ones (hist, drafts)."""
    doc = json.loads(path.read_text())
    for r in doc.get("rows", []):
        r["alpha"] = alpha_mle(r["hist"])
        r["keep_rate"] = keep_rate(r["correct_drafts"], r["proposed_drafts"])
    doc["alpha_definition"] = ALPHA_DEFINITION
    path.write_text(json.dumps(doc, indent=1))
    return f"rederived {len(doc.get('rows', []))} rows of {path}"


def run_job(a, job, index, prompts, log_dir) -> list[dict]:
    t0 = time.monotonic()
    shared, configs = job["shared"], job["configs"]
    args = server_args(a, configs[0], max(len(p["input_ids"]) for p in prompts), shared=shared)
    kw = {} if a.device == "cpu" else dict(python=a.python, site=a.site, overlay=a.overlay)
    # Policy-major order: a prompt's later requests find its prefix in the radix cache (prefill once per prompt).
    work = [(c, p) for c in configs for p in prompts]
    with srvlib.launch(a.device, a.model, args, log_dir, timeout=a.startup_timeout_s,
                       ports=srvlib.server_ports(index, os.getpid()), **kw) as srv:
        t1 = time.monotonic()
        with ThreadPoolExecutor(a.shared_concurrency if shared else a.concurrency) as ex:
            res = list(ex.map(lambda w: srv.generate(w[1]["input_ids"], a.max_new_tokens, custom_params=(
                {LABEL_KEY: label(w[0])} if shared else None)), work))
        t2 = time.monotonic()
    rows = []
    for i, cfg in enumerate(configs):
        got = res[i * len(prompts):(i + 1) * len(prompts)]
        row = dict(cfg, kind="acceptance", model=Path(a.model).name, prompt_set=Path(a.prompts).name,
                   draft_weights=e2e_server.flag_value(a.server_arg, "--quantspec-draft-weights", "auto"),
                   device=a.device,
                   min_pages=a.min_pages if cfg["policy"] != "dense" else None,
                   sink_pages=a.sink_pages if cfg["policy"] != "dense" else None, page_size=a.page_size,
                   max_new_tokens=a.max_new_tokens, num_prompts=len(prompts),
                   prompt_tokens=[len(p["input_ids"]) for p in prompts], **metrics(got, cfg["gamma"]),
                   server="per-request" if shared else "own", configs_in_server=len(configs),
                   startup_s=round(srv.startup_s, 1), generate_s=round(t2 - t1, 1),
                   total_s=round(time.monotonic() - t0, 1), server_args=args)
        row["per_prompt"] = [dict(source=p["source"], n_tokens=len(p["input_ids"]),
                                  output_sha1=hashlib.sha1(json.dumps(r["output_ids"]).encode()).hexdigest()[:16],
                                  **{k: r["meta_info"].get(k) for k in ("completion_tokens", "spec_verify_ct",
                                                                         "spec_num_correct_drafts",
                                                                         "spec_correct_drafts_histogram")})
                             for p, r in zip(prompts, got)]
        rows.append(row)
    return rows


def describe(row) -> str:
    fmt = lambda x: "  -  " if x is None else f"{x:.3f}"  # noqa: E731
    name = row["policy"] + ("" if row["ratio"] is None else f"@{row['ratio']:g}")
    return (f"{name:16s} γ={row['gamma']}  α={fmt(row['alpha'])}  keep={fmt(row['keep_rate'])}  τ={fmt(row['tau'])}  pos=["
            + " ".join(fmt(x) for x in row["pos_accept"]) + f"]  verifies={row['verify_ct']}  "
            f"start {row['startup_s']:.0f}s gen {row['generate_s']:.0f}s")


def environment(a) -> dict:
    """Device and versions as the server's Python sees them (on the GPU machine the bench's own Python may not)."""
    code = ("import json, importlib.metadata as m, torch\n"
            "v = {}\n"
            "for d in ('sglang', 'torch', 'triton', 'transformers', 'flashinfer-python', 'sglang-kernel'):\n"
            "    try: v[d] = m.version(d)\n"
            "    except Exception: pass\n"
            "dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu'\n"
            "print('ENV ' + json.dumps({'device': dev, 'versions': v}))\n")
    _, env = srvlib.command_and_env(a.device, a.model, 0, [], **({} if a.device == "cpu" else dict(
        python=a.python, site=a.site, overlay=a.overlay)))
    info = {"device": a.device, "versions": {}}
    try:
        out = subprocess.run([a.python if a.device == "cuda" else sys.executable, "-c", code], env=env, cwd="/tmp",
                             capture_output=True, text=True, timeout=300).stdout
        info = json.loads(next(x for x in out.splitlines() if x.startswith("ENV "))[4:])
    except Exception as e:  # versions are nice to have; the run is the result
        info["error"] = f"{type(e).__name__}: {e}"
    info["versions"]["sgl-spec"] = common.git_commit()
    info["date"] = time.strftime("%Y-%m-%d")
    info["cpu_count"] = os.cpu_count()
    return info


def agreement(rows) -> dict:
    """Per prompt: do all configurations produce the same greedy output? (lossless ⇒ yes, up to bf16 near-ties)"""
    by_prompt = {}
    for r in rows:
        for p in r.get("per_prompt", []):
            by_prompt.setdefault((p["source"], p["n_tokens"], r["max_new_tokens"]), set()).add(p["output_sha1"])
    same = sum(len(v) == 1 for v in by_prompt.values())
    return {"prompts": len(by_prompt), "identical_across_configs": same}


def write(a, info, rows):
    key = lambda r: (r.get("model"), r["policy"], r["ratio"], r["gamma"], r.get("min_pages"), r.get("sink_pages"),  # noqa: E731
                     r["page_size"], r["max_new_tokens"], r["num_prompts"], tuple(r["prompt_tokens"]),
                     r.get("draft_weights", "auto"), r.get("device", "cuda"))
    old = []
    if a.merge and a.out.exists():
        with contextlib.suppress(ValueError, OSError):  # an unreadable old file: start afresh
            old = json.loads(a.out.read_text()).get("rows", [])
    new_keys = {key(r) for r in rows}
    merged = [r for r in old if key(r) not in new_keys] + rows
    doc = dict(info, command=common.command(), alpha_definition=ALPHA_DEFINITION,
               model=str(a.model),
               prompts=str(a.prompts), settings=dict(concurrency=a.concurrency, parallel=a.parallel,
                                                     cuda_graph=a.cuda_graph, grid=a.grid),
               elapsed_s=round(time.monotonic() - T0, 1), outputs=agreement(merged), rows=merged)
    common.write_json(a.out, doc)
    return doc


def main(argv=None):
    a = parse_args(argv)
    if a.rederive:
        for path in a.rederive:
            log(rederive(path))
        return 0
    prompts = prompt_set.load(a.prompts, limit=a.num_prompts, cut=a.cut)
    configs = grid(a)
    a.overlay = srvlib.overlay_dir() if a.device == "cuda" else None
    log_dir = a.out.parent / "acceptance_logs"
    log(f"[acceptance] {len(configs)} configurations x {len(prompts)} prompts "
        f"({min(len(p['input_ids']) for p in prompts)}-{max(len(p['input_ids']) for p in prompts)} tokens), "
        f"{a.max_new_tokens} new tokens, device {a.device}, {a.parallel} server(s) at once, logs {log_dir}")
    info = environment(a)
    log(f"[acceptance] {info.get('device')} {info.get('versions')}")
    rows, failed = [], []
    todo = jobs(a, configs)
    log(f"[acceptance] {len(todo)} server launch(es): {sum(j['shared'] for j in todo)} per-request (one per γ), "
        f"{sum(not j['shared'] for j in todo)} single-configuration")

    def one(index, job):
        if a.time_budget_s is not None and time.monotonic() - T0 > a.time_budget_s:
            failed.extend(dict(cfg, error="skipped: --time-budget-s") for cfg in job["configs"])
            return
        try:
            got = run_job(a, job, index, prompts, log_dir)
        except Exception as e:  # one broken configuration must not lose the others
            failed.extend(dict(cfg, error=f"{type(e).__name__}: {str(e)[-3000:]}") for cfg in job["configs"])
            log(f"[acceptance] FAILED γ={job['gamma']} {[label(c) for c in job['configs']]}: {type(e).__name__}: "
                f"{str(e)[-1500:]}")
            return
        with _LOCK:
            rows.extend(got)
            write(a, info, rows)
        for row in got:
            log(describe(row))

    # Longest jobs first (a per-request server serves many configurations), so the last wave is short.
    order = sorted(range(len(todo)), key=lambda i: -len(todo[i]["configs"]))
    with ThreadPoolExecutor(a.parallel) as ex:
        list(ex.map(lambda i: one(i, todo[i]), order))
    doc = write(a, dict(info, failed=failed), rows)
    ag = doc["outputs"]
    log(f"[acceptance] {len(rows)}/{len(configs)} configurations in {time.monotonic() - T0:.0f}s; greedy outputs "
        f"identical across configurations for {ag['identical_across_configs']}/{ag['prompts']} prompts; {a.out}")
    for f in failed:
        log(f"[acceptance] not run: {f['policy']} ratio={f['ratio']} γ={f['gamma']}: {f['error'][:200]}")
    if not a.no_plot and rows:
        try:
            import plot_acceptance

            log(f"[plot] {plot_acceptance.plot(a.out, a.out.with_suffix('.png'))}")
        except Exception as e:  # no matplotlib on the GPU machine, say: the JSON is the result
            log(f"[plot] skipped ({type(e).__name__}: {e}); run: python bench/plot_acceptance.py {a.out}")
    return 0 if rows and not [f for f in failed if not f["error"].startswith("skipped")] else 1


if __name__ == "__main__":
    sys.exit(main())
