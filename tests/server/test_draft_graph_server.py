"""The draft-graph path of sgl_spec/speculative/draft_graph.py in a real SGLang server on CPU.

CPU has no CUDA graphs, so the server builds SGLang's decode graph runner for the draft passes and "replays" each
captured forward by calling it again under the static buffers (``SGL_SPEC_DRAFT_GRAPHS=eager``, a debugging mode):
the same buffer filling, padding to the captured batch sizes, static draft tensors and routing as on the GPU, minus
``torch.cuda.CUDAGraph``. Drafts only decide speed, so outputs must equal the INT8-only mode's token for token (as in
test_quantspec_server.py), sequentially and 16 at a time (padded replays: 16 requests run as captured sizes that
are not their own while requests finish), for sparse and dense drafts; the log must show replays.
One request at a time, the replayed drafts must be the eager drafts (same accepted-draft counts per round), with
SGLang's layers and with the fused draft layers (sgl_spec/speculative/draft_layers.py; in fp32 the two differ by rounding only,
and the eager drafts of the default server run the fused layers too). The default CPU server (no SGLang decode
graphs) must say that drafts run eagerly.
"""
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness import launch_server

from sgl_spec.patches import sglang
from test_quantspec_server import COMMON, PROMPTS, SPEC_ARGS, _gen

pytestmark = pytest.mark.server

EAGER_REPLAY = {"SGL_SPEC_DRAFT_GRAPHS": "eager"}
IDX = [0, 3, 4, 9, 14, 17, 19, 21]  # one token, one page, page boundaries, several pages, a prefix hit
# SGLang's default decode capture sizes reach past 16; capture a few small ones (a CPU capture is a real forward).
CAPTURE = ["--cuda-graph-max-bs-decode", "8"]  # 0.5.23 has no bare --cuda-graph-max-bs
UNFUSED = ["--quantspec-fused-draft", "off"]
# Whether the installed SGLang's decoder layers take the fused draft forward (sgl_spec/patches/), and what the
# server logs either way.
FUSED = sglang().FUSED_DRAFT_LAYERS_UNSUPPORTED is None
FUSED_LINE = ("draft passes fuse norm + qkv + rope and norm + gate_up + silu_mul" if FUSED
              else "draft passes keep SGLang's layers")


@pytest.fixture(scope="module")
def int8_ref(tiny_int8_outputs):
    """The INT8-only mode's outputs (tests/server/conftest.py), by prompt index."""
    return dict(enumerate(tiny_int8_outputs[0]))


def _replays(srv):
    return srv.log_path.read_text(errors="replace").count("draft pass replayed from a CUDA graph")


def _run(srv, idx):
    res = [_gen(srv, PROMPTS[i]) for i in idx]
    return [r["output_ids"] for r in res], [r["meta_info"]["spec_correct_drafts_histogram"] for r in res]


@pytest.fixture(scope="module")
def eager_drafts(tiny_llama_fp32):
    """The default CPU server: SGLang captures no decode graphs, so neither do the drafts (eager forwards, through the
    fused draft layers: the default)."""
    with launch_server(tiny_llama_fp32, SPEC_ARGS + CAPTURE) as srv:
        out = _run(srv, IDX)
        log = srv.log_path.read_text(errors="replace")
    assert "draft passes run eagerly (SGLang captured no decode CUDA graphs)" in log
    assert FUSED_LINE in log
    assert "draft pass replayed" not in log
    return out


def test_eager_drafts_are_lossless(int8_ref, eager_drafts):
    assert eager_drafts[0] == [int8_ref[i] for i in IDX]


def test_eager_replayed_draft_graphs_draft_the_same_tokens(tiny_llama_fp32, int8_ref, eager_drafts):
    # SGLang's own layers in the graphs too (the fused ones: test_fused_draft_layers_draft_the_same_tokens)
    with launch_server(tiny_llama_fp32, SPEC_ARGS + CAPTURE + UNFUSED, env=EAGER_REPLAY) as srv:
        log = srv.log_path.read_text(errors="replace")
        assert "captured draft forwards (eager replay, debugging)" in log and "sparse, KCAP=" in log
        assert "fused layers at bs=none" in log
        out, hist = _run(srv, IDX)
        # One request at a time replays the bs=1 capture: the same drafts as the eager path, so the same number of
        # accepted drafts in every round (the histogram), not only the same (lossless) output.
        assert out == [int8_ref[i] for i in IDX]
        assert hist == eager_drafts[1]
        assert _replays(srv) >= 1
        # steps 2 … γ of a round take DraftGraphRunner.replay_next (two buffer copies and the replay), not SGLang's
        # forward path; the histograms above show they draft what the eager path drafts
        assert "draft steps after the first of a round replay their graph directly" in srv.log_path.read_text()
        with ThreadPoolExecutor(16) as ex:
            conc = list(ex.map(lambda i: _gen(srv, PROMPTS[i])["output_ids"], range(16)))
        # Batches above the largest captured size (8) draft eagerly, smaller ones replay padded captures.
        assert conc == [int8_ref[i] for i in range(16)]
        assert _replays(srv) >= 2, srv.log_tail()


def test_eager_replayed_dense_draft_graphs_are_lossless(tiny_llama_fp32, int8_ref):
    args = COMMON + ["--spec-algo", "quantspec", "--speculative-num-steps", "5", "--quantspec-dense-draft"] + CAPTURE
    with launch_server(tiny_llama_fp32, args, env=EAGER_REPLAY) as srv:
        assert "(dense drafts;" in srv.log_path.read_text(errors="replace")
        got, _ = _run(srv, IDX)
        assert _replays(srv) >= 1
    assert got == [int8_ref[i] for i in IDX]


def test_eager_replayed_per_head_draft_graphs_are_lossless(tiny_llama_fp32, int8_ref):
    """--quantspec-draft-pages topk-head (lse page scores): the draft statics hold per-kv-head tables."""
    args = SPEC_ARGS + ["--quantspec-draft-pages", "topk-head", "--quantspec-page-score", "lse"] + CAPTURE
    with launch_server(tiny_llama_fp32, args, env=EAGER_REPLAY) as srv:
        assert "per kv head (" in srv.log_path.read_text(errors="replace")
        got, _ = _run(srv, IDX)
        with ThreadPoolExecutor(16) as ex:
            conc = list(ex.map(lambda i: _gen(srv, PROMPTS[i])["output_ids"], range(16)))
        assert _replays(srv) >= 2, srv.log_tail()
    assert got == [int8_ref[i] for i in IDX]
    assert conc == [int8_ref[i] for i in range(16)]


def test_fused_draft_layers_draft_the_same_tokens(tiny_llama_fp32, int8_ref, eager_drafts):
    """--quantspec-fused-draft on: the replayed draft forwards run the fused decoder layers
    (sgl_spec/speculative/draft_layers.py; on CPU sgl_spec/kernels/norm_pair_linear/ref.py, which computes SGLang's RMSNorm, linear,
    RoPE and SiluAndMul up to fp32 rounding: the norm weight folded into the weights). Outputs stay the INT8 mode's,
    and in fp32 the drafts are SGLang's layers' drafts: the same accepted-draft counts in every round as the eager
    (unfused) path."""
    with launch_server(tiny_llama_fp32, SPEC_ARGS + CAPTURE + ["--quantspec-fused-draft", "on"],
                       env=EAGER_REPLAY) as srv:
        log = srv.log_path.read_text(errors="replace")
        assert FUSED_LINE in log
        if FUSED:
            assert re.search(r"fused layers at bs=\[1, 2, ", log), log[-3000:]
        else:  # the release's decoder layers do not take the fused forward: SGLang's layers, and the same tokens
            assert "fused layers at bs=none" in log
        out, hist = _run(srv, IDX)
        assert _replays(srv) >= 1
        with ThreadPoolExecutor(16) as ex:
            conc = list(ex.map(lambda i: _gen(srv, PROMPTS[i])["output_ids"], range(16)))
    assert out == [int8_ref[i] for i in IDX]
    assert hist == eager_drafts[1]
    assert conc == [int8_ref[i] for i in range(16)]
