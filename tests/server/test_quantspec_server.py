"""``--spec-algo quantspec`` in a real SGLang server on CPU (tiny random Llama, fp32, page size 32).

Lossless means: greedy speculative output equals the INT8-only mode's output (``--attention-backend quantspec``,
same attention view, no speculation) token for token - for short, page-boundary and multi-page prompts, radix-cache
prefix hits, 16 concurrent requests, and greedy requests batched together with sampled ones. The spec server drafts
sparsely (10% of pages, at least 1, 1 sink page) so top-k page selection really runs on these short contexts; any
draft is allowed to be wrong, only acceptance must be exact. Acceptance rates on a random model mean nothing and
are not asserted beyond sanity (1 <= accept length <= γ+1).
"""
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from harness import launch_server

pytestmark = pytest.mark.server

P = 32
GAMMA = 3
N_NEW = 24
COMMON = ["--dtype", "float32", "--page-size", str(P), "--chunked-prefill-size", "64"]
INT8_ARGS = COMMON + ["--attention-backend", "quantspec"]
# "always": these tests are about the speculative path (auto-off would take plain steps on this CPU)
SPEC_ARGS = COMMON + ["--spec-algo", "quantspec", "--speculative-num-steps", str(GAMMA), "--quantspec-speculate",
                      "always", "--quantspec-topk-ratio", "0.1", "--quantspec-min-pages", "1",
                      "--quantspec-sink-pages", "1"]


def _ids(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, 8000, (n,), generator=g).tolist()


# 22 prompts: within one page, around page boundaries, several pages (with chunked prefill), and two that extend
# an earlier prompt (radix-cache prefix hits of 2 and 3 full pages).
LENGTHS = [1, 2, 7, 31, 32, 33, 40, 63, 64, 65, 70, 96, 97, 100, 127, 128, 129, 150, 160, 180]
PROMPTS = [_ids(n, seed) for seed, n in enumerate(LENGTHS)]
PROMPTS += [PROMPTS[13][:64] + _ids(20, 100), PROMPTS[19][:96] + _ids(9, 101)]


def _gen(srv, ids, **sp):
    params = {"max_new_tokens": N_NEW, "temperature": 0.0, "ignore_eos": True, **sp}
    return srv._json(srv.post("/generate", {"input_ids": ids, "sampling_params": params, "return_logprob": True}))


@pytest.fixture(scope="module")
def int8_outputs(tiny_int8_outputs):
    """Greedy outputs (and logprobs) of the non-speculative INT8 mode, one request at a time (conftest.py)."""
    return tiny_int8_outputs


@pytest.fixture(scope="module")
def spec_server(tiny_spec_server):
    tiny_spec_server.flush_cache()  # shared with test_penalties_server.py: start from an empty radix cache
    return tiny_spec_server


@pytest.fixture(scope="module")
def spec_sequential(spec_server):
    return [_gen(spec_server, p) for p in PROMPTS]


def test_greedy_equals_int8_mode(int8_outputs, spec_sequential):
    ref, _ = int8_outputs
    got = [r["output_ids"] for r in spec_sequential]
    mismatches = [(i, len(PROMPTS[i])) for i in range(len(PROMPTS)) if got[i] != ref[i]]
    assert not mismatches, f"(prompt index, prompt length) differing from the INT8 mode: {mismatches}"
    assert all(len(o) == N_NEW for o in got)


def test_spec_metrics_in_meta_info(spec_sequential):
    for r in spec_sequential:
        mi = r["meta_info"]
        # The prefill emits the first token; every later one comes from a verify round of at most γ+1 tokens.
        assert mi["spec_verify_ct"] >= (N_NEW - 1) / (GAMMA + 1)
        assert 1.0 <= mi["spec_accept_length"] <= GAMMA + 1
        assert "spec_accept_rate" in mi and sum(mi["spec_correct_drafts_histogram"]) == mi["spec_verify_ct"]


def test_loads_report_acceptance_without_metrics(spec_server, spec_sequential):
    """/v1/loads' speculative block on a server without --enable-metrics, after rounds on both sides of
    SGLang's decode-batch log lines (every 40 rounds): accept rate = accepted drafts / (γ per request-round) since
    the module's /flush_cache (which starts SGLang's lifetime counts over), from the same counts as the accept length
    (sgl_spec/speculative/spec_metrics.py)."""
    spec = spec_server.idle_load().get("speculative")
    assert spec is not None, "no speculative block in /v1/loads"
    assert 0.0 < spec["accept_rate"] <= 1.0
    assert spec["accept_length"] == pytest.approx(1 + GAMMA * spec["accept_rate"], rel=1e-12)


def test_logprobs_match_int8_mode(int8_outputs, spec_sequential):
    """Verify rows and non-speculative decode compute the same logits through different kernels (window of γ+1 vs
    one query): fp32 summation order differs, so compare to 1e-3 (logprobs here are O(1..10))."""
    _, ref_lp = int8_outputs
    for r, ref in zip(spec_sequential, ref_lp):
        lp = [x[0] for x in r["meta_info"]["output_token_logprobs"]]
        assert len(lp) == N_NEW
        torch.testing.assert_close(torch.tensor(lp), torch.tensor(ref), atol=1e-3, rtol=0)


def test_sixteen_concurrent_requests_match_batch_one(spec_server, spec_sequential):
    idx = list(range(16))
    with ThreadPoolExecutor(16) as ex:
        conc = list(ex.map(lambda i: _gen(spec_server, PROMPTS[i])["output_ids"], idx))
    assert conc == [spec_sequential[i]["output_ids"] for i in idx]


def test_greedy_stays_exact_next_to_sampled_requests(int8_outputs, spec_server):
    """A batch mixing greedy and sampled requests takes the rejection-sampling path for the sampled rows and exact
    argmax matching for the greedy rows."""
    ref, _ = int8_outputs
    jobs = [(i, {}) for i in range(0, 8)] + [(i, dict(temperature=0.8, top_p=0.9, top_k=40)) for i in range(8)]
    with ThreadPoolExecutor(len(jobs)) as ex:
        res = list(ex.map(lambda job: _gen(spec_server, PROMPTS[job[0]], **job[1]), jobs))
    for (i, sp), r in zip(jobs, res):
        assert len(r["output_ids"]) == N_NEW and all(0 <= t < 8192 for t in r["output_ids"])
        assert r["meta_info"]["spec_verify_ct"] > 0
        if not sp:
            assert r["output_ids"] == ref[i]


def test_sampling_runs_and_differs_between_seeds(spec_server):
    outs = [_gen(spec_server, PROMPTS[10], temperature=1.0)["output_ids"] for _ in range(3)]
    assert all(len(o) == N_NEW for o in outs)
    assert len({tuple(o) for o in outs}) > 1  # a random model at T=1 over 8192 tokens: repeats are ~impossible


@pytest.mark.parametrize("k", [0, 2, 5, 11])
def test_stop_token_inside_a_window_trims_exactly(int8_outputs, spec_server, k):
    ref, _ = int8_outputs
    stop = ref[8][k]
    out = _gen(spec_server, PROMPTS[8], stop_token_ids=[stop], ignore_eos=False)
    assert out["output_ids"] == ref[8][: ref[8].index(stop) + 1]
    assert out["meta_info"]["finish_reason"]["type"] == "stop"


@pytest.mark.parametrize("n", [1, 2, 5, 13])
def test_max_new_tokens_not_a_multiple_of_the_window(int8_outputs, spec_server, n):
    ref, _ = int8_outputs
    assert _gen(spec_server, PROMPTS[15], max_new_tokens=n)["output_ids"] == ref[15][:n]


def test_dense_draft_mode_is_lossless_too(tiny_llama_fp32, int8_outputs):
    """--quantspec-dense-draft: no page scores, the draft reads every complete page (the backend's dense path)."""
    ref, _ = int8_outputs
    idx = [3, 9, 14, 19, 21]  # one page, a page boundary, several pages, the longest, a prefix-sharing prompt
    args = COMMON + ["--spec-algo", "quantspec", "--speculative-num-steps", "5", "--quantspec-dense-draft",
                     "--quantspec-speculate", "always"]
    with launch_server(tiny_llama_fp32, args) as srv:
        got = [_gen(srv, PROMPTS[i]) for i in idx]
    assert [g["output_ids"] for g in got] == [ref[i] for i in idx]
    assert all(g["meta_info"]["spec_verify_ct"] > 0 for g in got)


@pytest.mark.parametrize("speculate", ["never", "auto"])
def test_plain_steps_and_auto_mode_are_lossless(tiny_llama_fp32, int8_outputs, speculate):
    """--quantspec-speculate never: every decode step is auto-off's plain step (on CPU: the one-token eager DECODE
    forward; on a GPU the verify-shaped one replaying the CUDA graph, tests/server/test_server_gpu.py). SGLang still
    counts one verify per step, none accepting a draft. auto (the default): whatever it chooses, same output."""
    ref, ref_lp = int8_outputs
    idx = [0, 4, 9, 15, 19, 20]
    args = [a if a != "always" else speculate for a in SPEC_ARGS]
    with launch_server(tiny_llama_fp32, args) as srv:
        got = [_gen(srv, PROMPTS[i]) for i in idx]
    assert [g["output_ids"] for g in got] == [ref[i] for i in idx]
    for i, g in zip(idx, got):
        mi = g["meta_info"]
        lp = [x[0] for x in mi["output_token_logprobs"]]
        assert lp == pytest.approx(ref_lp[i], abs=1e-4)
        if speculate == "never":  # one "verify" per step, no draft accepted (accept length counts the prefill token)
            assert mi["spec_verify_ct"] == N_NEW - 1 and mi["spec_correct_drafts_histogram"][0] == N_NEW - 1
