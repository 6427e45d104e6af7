"""The real SGLang server on the GPU with quantspec (Triton kernels, SGLang's decode CUDA graphs on), pycode-30m in
bf16 (sgl_kernel's rmsnorm has no fp32 CUDA kernel, so the CPU tests' fp32 setting cannot run here).

Run on the GPU machine with the gpu-kit installed and sgl-spec pip-installed:
    SGL_SPEC_TEST_DEVICE=cuda python3 -m pytest -q tests/gpu/test_server_gpu.py

* lossless: speculative greedy output equals the non-speculative INT8 mode's output, prompt for prompt (both run the
  same verify kernel per row; see docs/CONTRACTS.md);
* radix: a request sharing complete pages with an earlier one reports cached_tokens > 0 and gives the cold output;
* batching: 16 concurrent mixed-length requests give the one-at-a-time outputs;
* metrics: accept length in meta_info;
* auto-off: the plain steps (verify-shaped, in the CUDA graph) and the default auto mode give the INT8 mode's output.
"""
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cpu"))
from harness import launch_server  # noqa: E402
from oracle import pycode_model_dir  # noqa: E402
from test_pycode_server import _gen, code_prompts  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.server, pytest.mark.timeout(1200)]

COMMON = ["--dtype", "bfloat16", "--max-total-tokens", "65536", "--chunked-prefill-size", "256",
          "--mem-fraction-static", "0.5"]
INT8_ARGS = COMMON + ["--attention-backend", "quantspec"]
SPEC_ARGS = COMMON + ["--spec-algo", "quantspec", "--quantspec-speculate", "always"]
PLAIN_ARGS = COMMON + ["--spec-algo", "quantspec", "--quantspec-speculate", "never"]  # auto-off's plain steps only
AUTO_ARGS = COMMON + ["--spec-algo", "quantspec"]  # the default: auto


@pytest.fixture(scope="module", autouse=True)
def _cuda_server():
    if os.environ.get("SGL_SPEC_TEST_DEVICE") != "cuda":
        pytest.skip("set SGL_SPEC_TEST_DEVICE=cuda on the GPU machine")


@pytest.fixture(scope="module")
def prompts():
    from transformers import AutoTokenizer

    return code_prompts(AutoTokenizer.from_pretrained(pycode_model_dir()))


@pytest.fixture(scope="module")
def int8_out(prompts):
    with launch_server(pycode_model_dir(), INT8_ARGS) as srv:
        out = []
        for _, ids in prompts:
            srv.flush_cache()
            out.append(_gen(srv, ids)["output_ids"])
        return out


@pytest.fixture(scope="module")
def spec(prompts, int8_out):
    with launch_server(pycode_model_dir(), SPEC_ARGS) as srv:
        srv.flush_cache()
        res = [_gen(srv, ids) for _, ids in prompts]
        yield srv, res


def test_spec_greedy_equals_int8_mode_on_gpu(prompts, int8_out, spec):
    _, res = spec
    bad = [(name, next(i for i, (a, b) in enumerate(zip(r["output_ids"], o)) if a != b))
           for (name, _), r, o in zip(prompts, res, int8_out) if r["output_ids"] != o]
    print(f"[gpu] spec == int8 for {len(prompts) - len(bad)}/{len(prompts)} prompts; first divergences: {bad}")
    assert not bad


def test_accept_length_reported(spec):
    _, res = spec
    acc = [r["meta_info"]["spec_accept_length"] for r in res]
    verify = sum(r["meta_info"]["spec_verify_ct"] for r in res)
    print(f"[gpu] mean spec_accept_length {sum(acc) / len(acc):.3f} over {len(acc)} prompts, {verify} verify passes")
    assert all(a >= 1.0 for a in acc) and verify > 0


def test_prefix_hit_gives_cold_output_on_gpu(prompts, spec):
    srv, res = spec
    srv.flush_cache()
    ids = prompts[19][1]  # 1500 tokens
    cold = _gen(srv, ids)
    warm = _gen(srv, ids[:1024] + prompts[0][1][:40])
    srv.flush_cache()
    warm_cold = _gen(srv, ids[:1024] + prompts[0][1][:40])
    assert cold["output_ids"] == res[19]["output_ids"]
    assert warm["meta_info"]["cached_tokens"] >= 1024 - 64
    assert warm["output_ids"] == warm_cold["output_ids"]


def test_sixteen_concurrent_equal_one_at_a_time_on_gpu(prompts, spec):
    srv, res = spec
    srv.flush_cache()
    idx = list(range(16))
    with ThreadPoolExecutor(16) as pool:
        outs = list(pool.map(lambda i: _gen(srv, prompts[i][1])["output_ids"], idx))
    assert outs == [res[i]["output_ids"] for i in idx]
    assert torch.cuda.is_available()


@pytest.mark.parametrize("args", [PLAIN_ARGS, AUTO_ARGS], ids=["never", "auto"])
def test_auto_off_paths_equal_int8_mode_on_gpu(prompts, int8_out, args):
    with launch_server(pycode_model_dir(), args) as srv:
        srv.flush_cache()
        res = [_gen(srv, ids) for _, ids in prompts]
    bad = [name for (name, _), r, o in zip(prompts, res, int8_out) if r["output_ids"] != o]
    acc = sum(r["meta_info"]["spec_accept_length"] for r in res) / len(res)
    print(f"[gpu] {args[-1]}: == int8 for {len(prompts) - len(bad)}/{len(prompts)} prompts, mean accept {acc:.2f}")
    assert not bad
    if "never" in args:  # plain steps only: no draft ever accepted
        assert all(sum(r["meta_info"]["spec_correct_drafts_histogram"][1:]) == 0 for r in res)
