"""The real SGLang server on the GPU with quantspec (Triton kernels, SGLang's CUDA graphs on), pycode-30m in bf16
(sgl_kernel's rmsnorm has no fp32 CUDA kernel, so the CPU tests' fp32 setting cannot run here).

Run on the GPU machine with the gpu-kit installed and sgl-spec pip-installed:
    SGL_SPEC_TEST_DEVICE=cuda python3 -m pytest -q -s tests/server/test_server_gpu.py

* lossless: speculative greedy output equals the non-speculative INT8 mode's output, prompt for prompt (both run the
  same verify kernel per row; see docs/CONTRACTS.md), at the default γ and at γ = 12, with the draft passes replayed
  from their own CUDA graphs (sgl_spec/speculative/draft_graph.py; the log must say so) and, as a cross-check, with eager drafts
  (``SGL_SPEC_DRAFT_GRAPHS=off``): one request at a time both draft the same tokens (same accepted-draft
  histograms); wall times are printed;
* radix: a request sharing complete pages with an earlier one reports cached_tokens > 0 and gives the cold output;
* batching: 16 concurrent requests vs one at a time. In bf16 without deterministic inference the GEMMs' cuBLAS
  kernels depend on the batch shape (stock SGLang has the same property), so this is reported for the spec server
  and for the INT8-only server (the control), and only bounded: a divergence must start at a near tie of the serial
  run's top-2 logprobs. With ``--enable-deterministic-inference`` (SGLang's batch-invariant GEMMs; quantspec then
  fixes its verify split size and prefill key layout, backend.py ``batch_invariant``) it must be exact, in both modes;
* metrics: accept length in meta_info;
* auto-off: the plain steps (verify-shaped, in the CUDA graph) and the default auto mode give the INT8 mode's output;
* scheduling: the speculative servers above run SGLang's overlap scheduler (its default on CUDA), so every check of
  them is also a check of the overlap relay (lengths and last tokens through SGLang's FutureMap, requests joining and
  leaving between steps); the non-overlap scheduler (``--disable-overlap-schedule``) must give the same output.
"""
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness import launch_server  # noqa: E402
from oracle import REPO, pycode_model_dir  # noqa: E402
from test_pycode_server import _gen, code_prompts  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.server, pytest.mark.timeout(1800)]

# CUDA graphs only up to the largest batch a test sends (CONCURRENT): graphs of larger sizes would be captured at
# startup and never replayed.
COMMON = ["--dtype", "bfloat16", "--max-total-tokens", "65536", "--chunked-prefill-size", "256",
          "--mem-fraction-static", "0.5", "--cuda-graph-max-bs-decode", "16"]
INT8_ARGS = COMMON + ["--attention-backend", "quantspec"]
SPEC_ARGS = COMMON + ["--spec-algo", "quantspec", "--quantspec-speculate", "always"]
PLAIN_ARGS = COMMON + ["--spec-algo", "quantspec", "--quantspec-speculate", "never"]  # auto-off's plain steps only
AUTO_ARGS = COMMON + ["--spec-algo", "quantspec"]  # the default: auto
DETERMINISTIC = ["--enable-deterministic-inference"]
CONCURRENT = list(range(16))
# A batch-variance flip needs two nearly tied candidates; a wrong KV or mask flips confident tokens (several nats).
NEAR_TIE = 0.5
REPLAYED = "draft pass replayed from a CUDA graph"


@pytest.fixture(scope="module", autouse=True)
def _cuda_server():
    if os.environ.get("SGL_SPEC_TEST_DEVICE") != "cuda":
        pytest.skip("set SGL_SPEC_TEST_DEVICE=cuda on the GPU machine")


@pytest.fixture(scope="module")
def prompts():
    from transformers import AutoTokenizer

    return code_prompts(AutoTokenizer.from_pretrained(pycode_model_dir()))


def _concurrent(srv, prompts):
    srv.flush_cache()
    with ThreadPoolExecutor(len(CONCURRENT)) as pool:
        return list(pool.map(lambda i: _gen(srv, prompts[i][1])["output_ids"], CONCURRENT))


def _serve(prompts, args, env=None, flush_each=False, logprobs=False, extra=None, startup_s=300):
    """Serial results, then 16 concurrent requests; the server is gone when this returns (each one takes half the GPU
    memory, so two must never run at once)."""
    with launch_server(pycode_model_dir(), args, env=env, timeout=startup_s) as srv:
        srv.flush_cache()
        kw = {"return_logprob": True, "top_logprobs_num": 2} if logprobs else {}
        t0 = time.perf_counter()
        serial = []
        for _, ids in prompts:
            if flush_each:
                srv.flush_cache()
            serial.append(_gen(srv, ids, **kw))
        wall = time.perf_counter() - t0
        out = {"serial": serial, "wall_s": wall, "extra": extra(srv) if extra else None}
        out["concurrent"] = _concurrent(srv, prompts)
        out["overlap"] = not srv.server_info().get("disable_overlap_schedule", True)
        out["log"] = srv.log_path.read_text(errors="replace")
        return out


def _prefix_hit(prompts):
    def run(srv):
        srv.flush_cache()
        ids = prompts[19][1]  # 1500 tokens
        cold = _gen(srv, ids)
        warm = _gen(srv, ids[:1024] + prompts[0][1][:40])
        srv.flush_cache()
        warm_cold = _gen(srv, ids[:1024] + prompts[0][1][:40])
        return cold, warm, warm_cold
    return run


# The INT8 references see the same request sequence, radix hits included, as the speculative servers they are
# compared with. A hit reuses the pages an earlier request computed: prompt 20 reuses calendar.py's 640 tokens, whose
# last chunk ran as 128 rows, where a cold prefill of prompt 20 runs it as 228. Without deterministic inference the
# bf16 GEMMs round by batch shape, so those pages' INT8 view differs from a cold prefill's by rounding, which can flip
# a near tie (stock SGLang's radix cache has the same property). Same sequence, same view: exact equality holds.
@pytest.fixture(scope="module")
def int8(prompts):
    return _serve(prompts, INT8_ARGS, logprobs=True)


@pytest.fixture(scope="module")
def spec(prompts):
    return _serve(prompts, SPEC_ARGS, extra=_prefix_hit(prompts))


@pytest.fixture(scope="module")
def spec_eager_drafts(prompts):
    return _serve(prompts, SPEC_ARGS, env={"SGL_SPEC_DRAFT_GRAPHS": "off"})


def _ids(res):
    return [r["output_ids"] for r in res]


def _first_diffs(got, want, names):
    return [(names[i], next(j for j, (a, b) in enumerate(zip(g, w)) if a != b))
            for i, (g, w) in enumerate(zip(got, want)) if g != w]


def test_spec_greedy_equals_int8_mode_on_gpu(prompts, int8, spec):
    bad = _first_diffs(_ids(spec["serial"]), _ids(int8["serial"]), [n for n, _ in prompts])
    print(f"[gpu] spec == int8 for {len(prompts) - len(bad)}/{len(prompts)} prompts; first divergences: {bad}")
    assert not bad


LONG_GAMMA = 12  # γ+1 = 13 rows of G = 2: one 32-row verify tile (sgl_spec/kernels/verify_attention/triton.py block_rows)


@pytest.fixture(scope="module")
def spec_long(prompts):
    return _serve(prompts, SPEC_ARGS + ["--speculative-num-steps", str(LONG_GAMMA)])


def test_long_window_spec_equals_int8_mode_on_gpu(prompts, int8, spec_long):
    """γ = 12: the verify window's rows in one wide tile, the draft ring across a page boundary more often."""
    bad = _first_diffs(_ids(spec_long["serial"]), _ids(int8["serial"]), [n for n, _ in prompts])
    acc = [r["meta_info"]["spec_accept_length"] for r in spec_long["serial"]]
    print(f"[gpu] γ={LONG_GAMMA}: spec == int8 for {len(prompts) - len(bad)}/{len(prompts)} prompts, mean accept "
          f"{sum(acc) / len(acc):.2f}; first divergences: {bad}")
    assert not bad


def _gluon_or_skip():
    """Where the installed Triton is not the one the Gluon kernels are written for, the server refuses
    --quantspec-verify-kernel gluon at startup with that reason (tests/unit/test_backend.py): nothing to serve."""
    from sgl_spec.kernels.engine import gluon_device_support

    why = gluon_device_support("cuda", "verify")
    if why:
        pytest.skip(why)


@pytest.fixture(scope="module")
def spec_gluon_verify(prompts):
    _gluon_or_skip()
    return _serve(prompts, SPEC_ARGS + ["--quantspec-verify-kernel", "gluon"])


def test_gluon_verify_kernel_in_the_server(prompts, int8, spec_gluon_verify):
    """--quantspec-verify-kernel gluon: every verify window (the default γ: (γ+1) x 2 rows <= 32) through the Gluon
    page programs, CUDA graphs included. The INT8 server decodes one row at a time with the Triton kernel, so the two
    compute the same attention with fp32 sums in another order: every divergence must start at a near tie. Its
    verify's ring split runs as its own Gluon launch (sgl_spec/kernels/verify_attention/gluon_ring.py) at every batch, inside the verify
    CUDA graphs."""
    _assert_gluon_verify_ties_only(prompts, spec_gluon_verify, int8, "gluon verify")


def _gluon_ring_on():
    """verify_attention's gluon_ring rule for the Gluon verify servers' launches (Gluon engine, not batch-invariant):
    without it those servers would not cover the Gluon ring launch."""
    import importlib

    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    importlib.import_module("kernel_cases")  # sgl_spec.kernels importable where sgl-spec is not pip-installed
    from sgl_spec.kernels.verify_attention import triton as va

    return va.gluon_ring_rule(True, False, None)


def _assert_gluon_verify_ties_only(prompts, run, int8, label):
    """``run`` (a server with --quantspec-verify-kernel gluon) against the INT8 server: the Gluon verify ran, and
    every first divergence, of its serial and of its 16 concurrent requests, starts at a near tie of the INT8 server's
    serial top-2 logprobs (margin < NEAR_TIE)."""
    assert "quantspec verify kernel: gluon" in run["log"]
    assert _gluon_ring_on(), "the Gluon verify servers would not take the Gluon ring launch"
    names = [n for n, _ in prompts]
    loud = []
    # serial: batch-1 verify launches; concurrent: the 16 requests batched (the Gluon ring launch at batch > 1 too)
    runs = {"serial": (_ids(run["serial"]), range(len(names))), "16 concurrent": (run["concurrent"], CONCURRENT)}
    for mode, (got, idx) in runs.items():
        diffs = _first_diffs(got, [int8["serial"][i]["output_ids"] for i in idx], [names[i] for i in idx])
        margins = [(n, pos, round(_margin(int8["serial"][names.index(n)], pos), 4)) for n, pos in diffs]
        print(f"[gpu] {label}, {mode}: spec == int8 for {len(idx) - len(diffs)}/{len(idx)} prompts; "
              f"(prompt, first divergence, int8 top-2 logprob margin there): {margins}")
        loud += [(mode, m) for m in margins if m[2] >= NEAR_TIE]
    assert not loud, f"divergences at confident tokens (margin >= {NEAR_TIE}): {loud}"


P128 = ["--page-size", "128"]


@pytest.fixture(scope="module")
def int8_p128(prompts):
    return _serve(prompts, INT8_ARGS + P128, logprobs=True)


@pytest.fixture(scope="module")
def spec_p128(prompts):
    return _serve(prompts, SPEC_ARGS + P128)


@pytest.fixture(scope="module")
def spec_p128_gluon_verify(prompts):
    _gluon_or_skip()
    return _serve(prompts, SPEC_ARGS + P128 + ["--quantspec-verify-kernel", "gluon"])


def test_page_128_spec_equals_int8_mode_on_gpu(prompts, int8_p128, spec_p128):
    """--page-size 128 with the default engines (the Gluon draft page programs, each page as two 64-token
    sub-pages, where Gluon runs) gives the INT8 server's output exactly."""
    from sgl_spec.kernels.engine import gluon_device_support

    names = [n for n, _ in prompts]
    engine = "triton" if gluon_device_support("cuda", "draft") else "gluon"
    assert f"quantspec draft kernel: {engine}" in spec_p128["log"]
    bad = _first_diffs(_ids(spec_p128["serial"]), _ids(int8_p128["serial"]), names)
    print(f"[gpu] page 128 ({engine} drafts): spec == int8 for {len(prompts) - len(bad)}/{len(prompts)} prompts; "
          f"first divergences: {bad}")
    assert not bad


def test_page_128_gluon_verify_ties_only(prompts, int8_p128, spec_p128_gluon_verify):
    """--page-size 128 with --quantspec-verify-kernel gluon (the verify's sub-pages too): every divergence from the
    INT8 server (Triton, one row a step) must start at a near tie, as at page size 64."""
    _assert_gluon_verify_ties_only(prompts, spec_p128_gluon_verify, int8_p128, "page 128, gluon verify")


def test_draft_passes_replay_cuda_graphs(spec):
    log = spec["log"]
    assert "captured draft CUDA graphs for bs=" in log, "no draft graphs were captured"
    replayed = [line for line in log.splitlines() if REPLAYED in line]
    print(f"[gpu] draft graph sizes replayed: {[line.split('(')[-1] for line in replayed]}")
    assert replayed, "the draft passes never replayed a CUDA graph"
    # steps 2 … γ of a round replay the graph directly (DraftGraphRunner.replay_next), not through SGLang's forward
    assert "draft steps after the first of a round replay their graph directly" in log


def test_prefill_takes_the_batched_engine(spec, int8):
    """On CUDA the EXTEND attention runs a batched engine: FA3 on Hopper, else Triton (never the per-request torch
    path). The lossless tests around this one compare servers that both prefill with it."""
    import torch

    want = "fa3" if torch.cuda.get_device_capability() >= (9, 0) else "triton"
    for srv in (spec, int8):
        engines = set(re.findall(r"quantspec prefill attention: (\w+)", srv["log"]))
        assert engines == {want}, f"prefill engines in the log: {engines}, expected {want}"


def test_graph_drafts_equal_eager_drafts(prompts, spec, spec_eager_drafts):
    """One request at a time the draft graph for bs=1 runs the eager draft's kernels on the same inputs: the same
    drafts, hence the same accepted-draft histogram per prompt; and the same (lossless) output."""
    g, e = spec["serial"], spec_eager_drafts["serial"]
    assert REPLAYED not in spec_eager_drafts["log"]
    n_tok = sum(len(r["output_ids"]) for r in g)
    print(f"[gpu] serial wall time for {len(g)} prompts / {n_tok} tokens: draft graphs {spec['wall_s']:.2f} s, "
          f"eager drafts {spec_eager_drafts['wall_s']:.2f} s")
    assert _ids(g) == _ids(e)
    hist = [(n, a["meta_info"]["spec_correct_drafts_histogram"], b["meta_info"]["spec_correct_drafts_histogram"])
            for (n, _), a, b in zip(prompts, g, e)]
    assert all(a == b for _, a, b in hist), [h for h in hist if h[1] != h[2]]


INT4_ARGS = SPEC_ARGS + ["--quantspec-draft-weights", "int4"]
INT4_COPY = "draft passes compute with the 4-bit copy of the linear weights"
# The first start on a machine JIT-compiles SGLang's Marlin GEMM (about 5 minutes on an H200), later ones load it.
INT4_STARTUP_S = 900


@pytest.fixture(scope="module")
def spec_int4(prompts):
    return _serve(prompts, INT4_ARGS, startup_s=INT4_STARTUP_S)


@pytest.fixture(scope="module")
def spec_int4_triton_eager(prompts):
    return _serve(prompts, INT4_ARGS, env={"SGL_SPEC_W4A16": "triton", "SGL_SPEC_DRAFT_GRAPHS": "off"},
                  startup_s=INT4_STARTUP_S)


def test_int4_draft_weights_spec_equals_int8_mode_on_gpu(prompts, int8, spec_int4, spec_int4_triton_eager):
    """4-bit draft weights change what is drafted, never what is emitted: the verify keeps the checkpoint's weights.
    Both W4A16 engines (auto's choice with draft CUDA graphs; the Triton kernel with eager drafts) against the INT8
    server, prompt for prompt."""
    want = _ids(int8["serial"])
    for name, srv in (("auto engine, graphs", spec_int4), ("triton engine, eager", spec_int4_triton_eager)):
        assert INT4_COPY in srv["log"], f"{name}: the log never says the drafts use the 4-bit copy"
        bad = _first_diffs(_ids(srv["serial"]), want, [n for n, _ in prompts])
        acc = [r["meta_info"]["spec_accept_length"] for r in srv["serial"]]
        print(f"[gpu] int4 drafts ({name}): spec == int8 for {len(prompts) - len(bad)}/{len(prompts)} prompts, "
              f"mean accept {sum(acc) / len(acc):.2f}; first divergences: {bad}")
        assert not bad
    assert REPLAYED in spec_int4["log"] and REPLAYED not in spec_int4_triton_eager["log"]


def test_accept_length_reported(spec):
    res = spec["serial"]
    acc = [r["meta_info"]["spec_accept_length"] for r in res]
    verify = sum(r["meta_info"]["spec_verify_ct"] for r in res)
    print(f"[gpu] mean spec_accept_length {sum(acc) / len(acc):.3f} over {len(acc)} prompts, {verify} verify passes")
    assert all(a >= 1.0 for a in acc) and verify > 0


def test_prefix_hit_gives_cold_output_on_gpu(spec):
    cold, warm, warm_cold = spec["extra"]
    assert cold["output_ids"] == spec["serial"][19]["output_ids"]
    assert warm["meta_info"]["cached_tokens"] >= 1024 - 64
    assert warm["output_ids"] == warm_cold["output_ids"]


def _margin(int8_result, pos):
    """Top-1 minus top-2 logprob of the serial INT8 run at output position ``pos`` (= the spec serial run's)."""
    top = int8_result["meta_info"]["output_top_logprobs"][pos]
    return top[0][0] - top[1][0]


def test_sixteen_concurrent_vs_one_at_a_time_on_gpu(prompts, int8, spec):
    """Without deterministic inference: report agreement for spec and for the INT8-only control; every divergence
    must start at a near tie (batch variance of bf16 GEMMs), never at a confident token."""
    names = [n for n, _ in prompts]
    report = {}
    for mode, run in (("spec", spec), ("int8 (control)", int8)):
        want = [run["serial"][i]["output_ids"] for i in CONCURRENT]
        diffs = _first_diffs(run["concurrent"], want, [names[i] for i in CONCURRENT])
        margins = [(n, pos, round(_margin(int8["serial"][names.index(n)], pos), 4)) for n, pos in diffs]
        report[mode] = margins
        print(f"[gpu] {mode}: batch-16 == serial for {len(CONCURRENT) - len(diffs)}/{len(CONCURRENT)} prompts; "
              f"(prompt, first divergence, serial top-2 logprob margin there): {margins}")
    loud = [(mode, m) for mode, ms in report.items() for m in ms if m[2] >= NEAR_TIE]
    assert not loud, f"divergences at confident tokens (margin >= {NEAR_TIE}): {loud}"


@pytest.fixture(scope="module")
def det_int8(prompts):
    return _serve(prompts, INT8_ARGS + DETERMINISTIC, flush_each=True)


@pytest.fixture(scope="module")
def det_spec(prompts):
    return _serve(prompts, SPEC_ARGS + DETERMINISTIC)


def test_deterministic_inference_is_batch_invariant(prompts, det_int8, det_spec):
    names = [n for n, _ in prompts]
    bad = {}
    for mode, run in (("spec", det_spec), ("int8", det_int8)):
        want = [run["serial"][i]["output_ids"] for i in CONCURRENT]
        bad[mode] = _first_diffs(run["concurrent"], want, [names[i] for i in CONCURRENT])
        print(f"[gpu] deterministic {mode}: batch-16 == serial for {len(CONCURRENT) - len(bad[mode])}/"
              f"{len(CONCURRENT)} prompts; first divergences: {bad[mode]}")
    lossless = _first_diffs(_ids(det_spec["serial"]), _ids(det_int8["serial"]), names)
    print(f"[gpu] deterministic spec == int8 for {len(names) - len(lossless)}/{len(names)} prompts: {lossless}")
    assert REPLAYED in det_spec["log"]
    assert not bad["spec"] and not bad["int8"] and not lossless


@pytest.fixture(scope="module")
def det_spec_sync(prompts):
    return _serve(prompts, SPEC_ARGS + DETERMINISTIC + ["--disable-overlap-schedule"])


def test_overlap_and_non_overlap_schedulers_agree(prompts, det_spec, det_spec_sync, spec):
    """Deterministic inference: the overlap server (default) and the non-overlap one give identical serial and
    concurrent outputs; the non-deterministic spec server runs with overlap too."""
    assert spec["overlap"] and det_spec["overlap"] and not det_spec_sync["overlap"]
    names = [n for n, _ in prompts]
    serial = _first_diffs(_ids(det_spec["serial"]), _ids(det_spec_sync["serial"]), names)
    conc = _first_diffs(det_spec["concurrent"], det_spec_sync["concurrent"], [names[i] for i in CONCURRENT])
    print(f"[gpu] overlap vs non-overlap scheduler (deterministic): serial {len(names) - len(serial)}/{len(names)}, "
          f"16 concurrent {len(CONCURRENT) - len(conc)}/{len(CONCURRENT)} identical; serial wall "
          f"{det_spec['wall_s']:.2f} s vs {det_spec_sync['wall_s']:.2f} s")
    assert not serial and not conc


@pytest.mark.parametrize("args", [PLAIN_ARGS, AUTO_ARGS], ids=["never", "auto"])
def test_auto_off_paths_equal_int8_mode_on_gpu(prompts, int8, args):
    with launch_server(pycode_model_dir(), args) as srv:
        srv.flush_cache()
        res = [_gen(srv, ids) for _, ids in prompts]
    bad = _first_diffs(_ids(res), _ids(int8["serial"]), [n for n, _ in prompts])
    acc = sum(r["meta_info"]["spec_accept_length"] for r in res) / len(res)
    print(f"[gpu] {args[-1]}: == int8 for {len(prompts) - len(bad)}/{len(prompts)} prompts, mean accept {acc:.2f}; "
          f"first divergences: {bad}")
    assert not bad
    if "never" in args:  # plain steps only: no draft ever accepted
        assert all(sum(r["meta_info"]["spec_correct_drafts_histogram"][1:]) == 0 for r in res)
