"""``--spec-algo quantspec`` on the reference model pycode-30m (real weights, served in fp32 on CPU): lossless on
real Python code.

Settings are the shipped defaults: page size 64, γ = 4, sparse drafts (top-k ratio 0.07, at least 8 pages, 1 sink
page), so prompts longer than 8 pages (> 512 tokens) draft from a strict subset of their pages.

* every greedy token equals the argmax of the INT8-view teacher-forcing oracle (tests/support/oracle.py) re-scoring the
  final sequence, and equals the non-speculative INT8 mode's output (``--attention-backend quantspec``);
* radix-cache prefix hits, ``--disable-radix-cache`` and 16 concurrent requests change nothing;
* the INT8 view is *not* the unquantized model: how often plain fp32/bf16 attention picks the same greedy token is
  measured and reported (``QUANTSPEC_RESULTS_DIR=bench/results`` writes int8_vs_bf16.json), never assumed.
"""
import json
import os
import re
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from harness import launch_server
from oracle import REPO, Scorer, agreement, greedy_mismatches, pycode_model_dir
from sgl_spec.config import DEFAULT_NUM_DRAFT_STEPS  # the server runs with γ at its default

pytestmark = [pytest.mark.server, pytest.mark.timeout(1800)]

P, GAMMA, N_NEW = 64, DEFAULT_NUM_DRAFT_STEPS, 40
# 16k KV tokens: 16 concurrent requests of up to ~1.5k tokens fit without retraction (retraction is not what the
# concurrency test is about). Chunks of 256 split the long prompts into several prefill chunks. --sleep-on-idle: an
# idle SGLang scheduler otherwise busy-polls a whole core, which slows whatever runs next to it on 2 cores.
COMMON = ["--dtype", "float32", "--max-total-tokens", "16384", "--chunked-prefill-size", "256", "--sleep-on-idle"]
INT8_ARGS = COMMON + ["--attention-backend", "quantspec"]
# page size, γ and the sparse draft at their defaults; speculating every step (auto-off would take plain steps here)
SPEC_ARGS = COMMON + ["--spec-algo", "quantspec", "--quantspec-speculate", "always"]

# Prompt lengths in tokens: inside the first page, around page boundaries, and 2 … 23 pages (sparse drafting past 8).
LENGTHS = [12, 40, 63, 64, 65, 100, 127, 128, 129, 200, 300, 384, 450, 513, 640, 700, 900, 1100, 1300, 1500]
SOURCES = ["json/decoder.py", "json/encoder.py", "textwrap.py", "heapq.py", "fractions.py", "statistics.py",
           "functools.py", "dataclasses.py", "argparse.py", "string.py", "shlex.py", "pprint.py", "queue.py", "csv.py",
           "calendar.py", "difflib.py", "ast.py", "contextlib.py", "enum.py", "random.py", "tokenize.py",
           "ipaddress.py"]


def code_prompts(tokenizer):
    """(source, token ids): Python stdlib files, from their first top-level def/class, cut to LENGTHS; then two
    prompts that share 10 / 16 complete pages with earlier ones (radix-cache hits) and continue with other code."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for name, n in zip(SOURCES, LENGTHS):
        text = (lib / name).read_text()
        start = re.search(r"^(def|class) ", text, re.M).start()
        ids = tokenizer(text[start:start + 12000]).input_ids  # ~3k tokens: enough, and tokenizing whole files warns
        assert len(ids) >= n, name
        out.append((name, ids[:n]))
    tail = [tokenizer((lib / name).read_text()[:2000]).input_ids for name in SOURCES[20:22]]
    out.append((f"{SOURCES[14]}+{SOURCES[20]}", out[14][1][:640] + tail[0][:100]))
    out.append((f"{SOURCES[19]}+{SOURCES[21]}", out[19][1][:1024] + tail[1][:60]))
    return out


def _gen(srv, ids, n=N_NEW, **extra):
    payload = {"input_ids": ids, "sampling_params": {"max_new_tokens": n, "temperature": 0.0, "ignore_eos": True},
               **extra}
    return srv._json(srv.post("/generate", payload, timeout=600))



# ---- fixtures ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_dir():
    return pycode_model_dir()


@pytest.fixture(scope="module")
def prompts(model_dir):
    from transformers import AutoTokenizer

    return code_prompts(AutoTokenizer.from_pretrained(model_dir))


@pytest.fixture(scope="module")
def int8_results(model_dir, prompts):
    """The non-speculative INT8 mode, every prompt prefilled cold (no radix cache), all requests at once: the
    speculative server's batch-1 outputs must equal these batched ones, and its batched outputs its batch-1 ones
    (test_sixteen_concurrent_mixed_lengths_equal_batch_one)."""
    with launch_server(model_dir, INT8_ARGS + ["--disable-radix-cache"]) as srv:
        with ThreadPoolExecutor(len(prompts)) as ex:
            return list(ex.map(lambda p: _gen(srv, p[1], return_logprob=True), prompts))


@pytest.fixture(scope="module")
def spec_server(model_dir, int8_results):  # int8_results first: its server is gone before this one starts
    with launch_server(model_dir, SPEC_ARGS) as srv:
        yield srv


@pytest.fixture(scope="module")
def spec_results(spec_server, prompts):
    """Speculative, one request at a time, radix cache kept: the last two prompts hit pages of earlier ones."""
    spec_server.flush_cache()
    return [_gen(spec_server, ids, return_logprob=True) for _, ids in prompts]


@pytest.fixture(scope="module")
def view_logits(model_dir, prompts, spec_results):
    """The INT8-view oracle re-scoring each prompt + its speculative greedy output (teacher forcing)."""
    scorer = Scorer(model_dir, page_size=P)
    return [scorer.generated_logits(ids, r["output_ids"]) for (_, ids), r in zip(prompts, spec_results)]


# ---- lossless -----------------------------------------------------------------------------------------------------
def test_spec_greedy_equals_int8_mode(prompts, int8_results, spec_results):
    assert len(prompts) >= 20
    diff = [(name, len(ids)) for (name, ids), a, b in zip(prompts, int8_results, spec_results)
            if a["output_ids"] != b["output_ids"]]
    assert not diff, f"(source, prompt tokens) whose speculative output differs from the INT8 mode: {diff}"
    assert all(len(r["output_ids"]) == N_NEW for r in spec_results)


def test_greedy_equals_view_oracle_argmax(prompts, spec_results, view_logits):
    """Each generated token is the oracle's argmax given everything before it, and the server's logprobs equal the
    oracle's to 1e-2. Both are fp32, but K/V come from two implementations (SGLang's model vs HF's) that differ in
    the last bits, and an element within that distance of a rounding boundary gets the neighbouring INT8 code:
    relative K/V noise of 2e-7 alone moves the oracle's logprobs by up to 3e-3 on the 1100-token prompt (measured);
    the server-oracle gap observed here is 1.9e-3. Hence a near-tie (oracle logit gap < 1e-2) may legitimately go
    either way: such tokens are counted and must stay rare; none occurred on the development machine."""
    worst, ties = [], []
    for (name, ids), r, logits in zip(prompts, spec_results, view_logits):
        out = r["output_ids"]
        bad = greedy_mismatches(logits, out)
        real = [b for b in bad if b[3] >= 1e-2]
        assert not real, f"{name} ({len(ids)} tokens): (index, server, oracle, oracle logit gap) {real[:5]}"
        ties += [(name, *b) for b in bad]
        got = torch.tensor([x[0] for x in r["meta_info"]["output_token_logprobs"]])
        ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(out)[:, None])[:, 0]
        worst.append((float((got - ref).abs().max()), len(ids)))
        torch.testing.assert_close(got, ref, atol=1e-2, rtol=0, msg=lambda m: f"{name}: {m}")
    print("max |server logprob - oracle logprob| (gap, prompt tokens):", sorted(worst)[-3:], "near-ties:", ties)
    assert len(ties) <= 2, ties


def test_spec_metrics_and_mean_accept_length(spec_results):
    """Real weights, so acceptance means something. The floor only catches a broken draft (a draft that never
    agrees gives 1.0); the measured mean is printed."""
    lens = []
    for r in spec_results:
        mi = r["meta_info"]
        assert mi["spec_verify_ct"] >= (N_NEW - 1) / (GAMMA + 1)
        # SGLang's accept length is completion tokens / verify passes, and the first token comes from the prefill:
        # at most γ+1 tokens a verify plus that one (40 tokens in 3 rounds of γ = 12 give 13.3)
        assert 1.0 <= mi["spec_accept_length"] <= GAMMA + 1 + 1.0 / mi["spec_verify_ct"]
        lens.append(mi["spec_accept_length"])
    mean = sum(lens) / len(lens)
    long = [x for (r, x) in zip(spec_results, lens) if r["meta_info"]["prompt_tokens"] > 8 * P]
    print(f"mean spec_accept_length {mean:.3f} over {len(lens)} prompts "
          f"({sum(long) / len(long):.3f} over the {len(long)} sparse-draft prompts > 8 pages)")
    assert mean >= 2.0


# ---- radix cache, batching ----------------------------------------------------------------------------------------
def test_prefix_hit_gives_the_cold_output(spec_server, prompts):
    base, other = prompts[14][1], prompts[20][1]  # other = base[:640] + 100 tokens of another file
    spec_server.flush_cache()
    cold = _gen(spec_server, other)
    spec_server.flush_cache()
    _gen(spec_server, base)
    hot = _gen(spec_server, other)
    assert cold["meta_info"]["cached_tokens"] == 0
    assert hot["meta_info"]["cached_tokens"] == 640  # the shared complete pages
    assert hot["output_ids"] == cold["output_ids"]


def test_sixteen_concurrent_mixed_lengths_equal_batch_one(spec_server, prompts, spec_results):
    idx = list(range(16))  # 12 … 700 tokens (3 of them past 8 pages: sparse drafts in a batch)
    spec_server.flush_cache()
    with ThreadPoolExecutor(len(idx)) as ex:
        conc = list(ex.map(lambda i: _gen(spec_server, prompts[i][1])["output_ids"], idx))
    diff = [len(prompts[i][1]) for i, c in zip(idx, conc) if c != spec_results[i]["output_ids"]]
    assert not diff, f"prompt lengths whose batched output differs from batch 1: {diff}"


def test_disable_radix_cache_changes_nothing(model_dir, prompts, spec_results, spec_server):
    """Runs after the radix-cache server's tests (module order); that server idles meanwhile."""
    idx = [1, 4, 8, 13, 17, 20, 21]
    with launch_server(model_dir, SPEC_ARGS + ["--disable-radix-cache"]) as srv, ThreadPoolExecutor(len(idx)) as ex:
        got = list(ex.map(lambda i: _gen(srv, prompts[i][1]), idx))
    assert all(g["meta_info"]["cached_tokens"] == 0 for g in got)
    assert [g["output_ids"] for g in got] == [spec_results[i]["output_ids"] for i in idx]


# ---- INT8 view vs the unquantized model ---------------------------------------------------------------------------
def test_int8_vs_plain_attention_agreement(model_dir, prompts, spec_results, view_logits):
    """Teacher-force quantspec's greedy output (= the INT8 mode's, asserted above) through plain attention (fp32, and
    bf16: the checkpoint's dtype) and count the positions whose argmax agrees. The numbers are a measurement, not a
    claim of identity; the asserts only check that the view really differs from plain attention on multi-page prompts
    and that agreement is not degenerate."""
    plain = {"fp32": Scorer(model_dir, dtype=torch.float32), "bf16": Scorer(model_dir, dtype=torch.bfloat16)}
    rows, max_logit_gap = [], 0.0
    for (name, ids), r, view in zip(prompts, spec_results, view_logits):
        out = r["output_ids"]
        row = {"source": name, "prompt_tokens": len(ids), "generated": len(out)}
        logits = {key: scorer.generated_logits(ids, out) for key, scorer in plain.items()}
        for key in plain:
            row[key] = agreement(logits[key], out)
        # baseline: how often bf16 itself agrees with fp32 (both plain) on the same sequence
        row["bf16_vs_fp32_plain"] = agreement(logits["bf16"], logits["fp32"].argmax(-1).tolist())
        if len(ids) > 2 * P:
            max_logit_gap = max(max_logit_gap, float((logits["fp32"] - view).abs().max()))
        rows.append(row)
    summary = {}
    for key in (*plain, "bf16_vs_fp32_plain"):
        agree = sum(r[key]["agree"] for r in rows)
        total = sum(r[key]["positions"] for r in rows)
        summary[key] = {"agree": agree, "positions": total, "fraction": round(agree / total, 4),
                        "prompts_identical": sum(r[key]["first_divergence"] is None for r in rows),
                        "prompts": len(rows)}
    print("INT8 view vs plain attention:", json.dumps(summary))
    assert max_logit_gap > 1e-3  # the view quantizes: a multi-page context moves the logits
    assert all(0.5 <= s["fraction"] <= 1.0 for s in summary.values())
    summary["note"] = ("fp32 / bf16: plain attention vs the INT8 view's greedy tokens; bf16_vs_fp32_plain: plain bf16 "
                       "vs plain fp32 argmax on the same sequences (how much of the bf16 gap is bf16 itself)")
    results_dir = os.environ.get("QUANTSPEC_RESULTS_DIR")
    if results_dir:
        _write_report(Path(results_dir) / "int8_vs_bf16.json", summary, rows, max_logit_gap)


def _write_report(path, summary, rows, max_logit_gap):
    import sglang
    import transformers

    git = ["git", "-C", str(REPO)]
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(git + ["status", "--porcelain", "--", "sgl_spec", "kernels", "patches"],
                           capture_output=True, text=True).stdout.strip()
    report = {
        "what": ("Greedy agreement between quantspec's INT8 KV view (the model quantspec serves, speculative or not) "
                 "and the unquantized model. For each prompt quantspec's greedy output (speculative; identical to the "
                 "INT8 mode's) is teacher-forced through plain attention; 'agree' counts generated positions whose "
                 "plain argmax is the INT8 token, 'first_divergence' is the first generated index where it is not "
                 "(= where plain greedy decoding would first leave the INT8 output; null: never within the generated "
                 "tokens). INT8 is not identical to BF16/FP32."),
        "command": "QUANTSPEC_RESULTS_DIR=bench/results .venv/bin/python -m pytest -q tests/server/test_pycode_server.py",
        "model": "pycode-30m", "spec_server_args": SPEC_ARGS, "int8_server_args": INT8_ARGS, "page_size": P,
        "new_tokens_per_prompt": N_NEW,
        "int8_dtype": "float32 (server and teacher-forcing oracle)",
        "plain_reference": {"fp32": "HF eager attention, float32", "bf16": "HF eager attention, bfloat16 weights"},
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                     "transformers": transformers.__version__, "sglang": sglang.__version__,
                     "sgl_spec_commit": commit or None, "sgl_spec_uncommitted_changes": dirty.splitlines()},
        "summary": summary,
        "max_abs_logit_diff_fp32_plain_vs_int8_view_prompts_over_2_pages": round(max_logit_gap, 4),
        "per_prompt": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")
