"""Servers shared by several test files: each configuration that more than one file needs starts once a session
(a CPU server costs ~25-50 s to start). A file that takes one over flushes its radix cache first, so it sees the
server as if freshly started."""
import pytest

from harness import launch_server


@pytest.fixture(scope="session")
def tiny_int8_server(tiny_llama_fp32):
    """The non-speculative INT8 mode (test_quantspec_server.py's INT8_ARGS) on SGLang's non-overlap scheduler (the
    CPU default; test_penalties_server.py needs it, and greedy INT8 output does not depend on the scheduler)."""
    from test_quantspec_server import INT8_ARGS

    with launch_server(tiny_llama_fp32, INT8_ARGS + ["--disable-overlap-schedule"]) as srv:
        yield srv


@pytest.fixture(scope="session")
def tiny_int8_outputs(tiny_int8_server):
    """Greedy outputs (and logprobs) of the INT8 mode for every one of test_quantspec_server.py's PROMPTS, one
    request at a time: the reference of the speculative tiny-Llama servers."""
    from test_quantspec_server import PROMPTS, _gen

    tiny_int8_server.flush_cache()
    res = [_gen(tiny_int8_server, p) for p in PROMPTS]
    return [r["output_ids"] for r in res], [[lp[0] for lp in r["meta_info"]["output_token_logprobs"]] for r in res]


@pytest.fixture(scope="session")
def tiny_spec_server(tiny_llama_fp32):
    """``--spec-algo quantspec`` with test_quantspec_server.py's SPEC_ARGS (sparse drafts, γ = 3)."""
    from test_quantspec_server import SPEC_ARGS

    with launch_server(tiny_llama_fp32, SPEC_ARGS) as srv:
        yield srv
