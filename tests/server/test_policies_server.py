"""Every draft page policy (sgl_spec/pages/policies.py, sgl_spec/experimental/) is lossless in a real SGLang server
on CPU: greedy output equals the INT8-only mode's (tests/server/conftest.py's shared server), token for token.

Plain topk is tests/server/test_quantspec_server.py's. Each policy server gets its four prompts at once (one batch);
the per-request server gets both label sets at once, so its batches mix eight policies (one row unlabelled). The
parsing of the flag and the page choices are tests/unit/test_pagetable.py's.
"""
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from harness import launch_server
from test_quantspec_server import COMMON  # page size 32, chunked prefill 64: the shared INT8 server's

pytestmark = pytest.mark.server

PROMPT_LENS = [33, 97, 129, 180]  # one page + 1, several pages (chunked), a page boundary + 1, the longest
# Ratio 0.5 for the options: k - sinks >= 2 from 5 pages on, so recent pages are forced.
LABELS = ["topk+r0.5+max@0.5", "streaming@0.3", "topk+ema0.5@0.2", None]
HEAD_LABELS = ["topk-head+r0.25+max@0.5", "topk@0.3", "topk-head+ema0.5@0.2", "streaming@0.3"]


def _prompts():
    g = torch.Generator().manual_seed(11)
    return [torch.randint(1, 8000, (n,), generator=g).tolist() for n in PROMPT_LENS]


PROMPTS = _prompts()


def _generate(srv, ids, label=None):
    params = {"max_new_tokens": 24, "temperature": 0.0, "ignore_eos": True}
    if label is not None:  # --quantspec-draft-pages per-request: the request's policy (sgl_spec/experimental/page_study.py)
        params["custom_params"] = {"quantspec_draft": label}
    return srv._json(srv.post("/generate", {"input_ids": ids, "sampling_params": params}))


def _all_at_once(srv, jobs):
    """(prompt, label) jobs sent together: the scheduler batches them."""
    with ThreadPoolExecutor(len(jobs)) as ex:
        return list(ex.map(lambda job: _generate(srv, *job), jobs))


def _spec_args(policy, ratio, *extra):
    return COMMON + ["--spec-algo", "quantspec", "--speculative-num-steps", "3", "--quantspec-topk-ratio", str(ratio),
                     "--quantspec-min-pages", "1", "--quantspec-draft-pages", policy, "--quantspec-speculate",
                     "always", *extra]


@pytest.fixture(scope="module")
def ref(tiny_int8_server):
    tiny_int8_server.flush_cache()
    return [_generate(tiny_int8_server, p)["output_ids"] for p in PROMPTS]


def _check(got, want, policy):
    assert [g["output_ids"] for g in got] == want, policy
    assert all(g["meta_info"]["spec_verify_ct"] > 0 for g in got), policy


@pytest.mark.parametrize("policy,ratio,extra", [
    ("streaming", 0.1, ()),
    ("topk-last", 0.1, ()),
    ("topk", 0.5, ("--quantspec-recent-share", "0.5", "--quantspec-score-smoothing", "ema")),
], ids=["streaming", "topk-last", "topk-options"])
def test_policy_is_lossless_in_the_server(tiny_llama_fp32, ref, policy, ratio, extra):
    with launch_server(tiny_llama_fp32, _spec_args(policy, ratio, *extra)) as srv:
        got = _all_at_once(srv, [(p, None) for p in PROMPTS])
    _check(got, ref, policy)


def test_topk_head_is_lossless_in_the_server(tiny_llama_fp32, ref):
    """Per-kv-head page tables (--quantspec-draft-pages topk-head)."""
    with launch_server(tiny_llama_fp32, _spec_args("topk-head", 0.3, "--quantspec-score-smoothing", "max")) as srv:
        got = _all_at_once(srv, [(p, None) for p in PROMPTS])
        log = srv.log_path.read_text(errors="replace")
    _check(got, ref, "topk-head")
    assert "topk-head pages" in log, log[-2000:]


def test_per_request_labels_are_lossless_in_the_server(tiny_llama_fp32, ref):
    """--quantspec-draft-pages per-request: per-layer and per-kv-head labels (and an unlabelled row, the server's
    ratio 0.1) in the same batches."""
    with launch_server(tiny_llama_fp32, _spec_args("per-request", 0.1)) as srv:
        got = _all_at_once(srv, [(p, lb) for p, lb in zip(PROMPTS, LABELS)] +
                           [(p, lb) for p, lb in zip(PROMPTS, HEAD_LABELS)])
    _check(got, ref + ref, "per-request")
