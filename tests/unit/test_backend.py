"""quantspec's attention backend (sgl_spec/kvcache/backend.py) driven the way SGLang drives it, without a model.

Each request's per-layer q/k/v are fixed random functions of its position, so every position's attention output is a
function of the token sequence only (the view of docs/CONTRACTS.md). Whatever way the sequence is split into forwards
- one EXTEND, chunked EXTENDs, EXTEND + DECODE steps, a radix-prefix hit, TARGET_VERIFY windows (also after a
rejected window) - the outputs must agree. Tolerance: all paths compute in fp32 from the same fp32 K/V and the same
quantized pages (bit-identical codes), so they differ only by summation order: 2e-5 absolute on O(1) outputs.
"""
from types import SimpleNamespace

import pytest
import torch

from sgl_spec.kvcache.backend import QuantSpecAttnBackend
from sgl_spec.config import QuantSpecConfig
from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref
from sgl_spec.kernels.verify_attention.gluon_rules import auto_min_pairs
from sgl_spec.kvcache.pool import QuantSpecKVPool

ATOL = 2e-5
Hq, H, D, LAYERS = 4, 2, 16, 2


def _mode(name):
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    return getattr(ForwardMode, name)


class Sim:
    """A pool + backend + req_to_token table, with a page allocator that hands out pages in shuffled order."""

    def __init__(self, P=32, num_pages=40, slots=6, ctx=512, speculative=False, head_dim=D, dtype=torch.float32):
        self.P, self.D = P, head_dim
        self.pool = QuantSpecKVPool(num_pages * P, page_size=P, dtype=dtype, head_num=H, head_dim=head_dim,
                                    layer_num=LAYERS, device="cpu", enable_memory_saver=False, num_slots=slots)
        self.rtt = torch.zeros((slots, ctx), dtype=torch.int32)
        self.free = (torch.randperm(num_pages, generator=torch.Generator().manual_seed(1)) + 1).tolist()
        cfg = QuantSpecConfig(speculative=speculative, page_size=P, num_draft_steps=4 if speculative else 0,
                              topk_ratio=0.07, min_pages=8, sink_pages=1, dense_draft=False)
        runner = SimpleNamespace(device="cpu", req_to_token_pool=SimpleNamespace(req_to_token=self.rtt),
                                 token_to_kv_pool=self.pool)
        self.backend = QuantSpecAttnBackend(runner, "torch_native", cfg)
        self.layers = [SimpleNamespace(layer_id=i, scaling=head_dim ** -0.5, logit_cap=0.0, sliding_window_size=-1)
                       for i in range(LAYERS)]

    def alloc(self, slot, upto):
        """Give request ``slot`` pages for every position < upto (page id = slot // P, slots page-contiguous)."""
        P = self.P
        for j in range(-(-upto // P)):
            if self.rtt[slot, j * P] == 0:
                page = self.free.pop()
                self.rtt[slot, j * P:(j + 1) * P] = page * P + torch.arange(P, dtype=torch.int32)

    def forward(self, mode, reqs, data):
        """reqs: list of (slot, request id, start, n): n new tokens at positions start … start+n-1.
        Returns {request id: per-layer outputs [n, Hq, D]}."""
        for slot, _, s, n in reqs:
            self.alloc(slot, s + n)
        pos = torch.cat([torch.arange(s, s + n) for _, _, s, n in reqs])
        fb = SimpleNamespace(
            forward_mode=_mode(mode), batch_size=len(reqs),
            req_pool_indices=torch.tensor([r[0] for r in reqs]), positions=pos,
            seq_lens=torch.tensor([s + n for _, _, s, n in reqs]),
            extend_prefix_lens_cpu=[s for _, _, s, _ in reqs], extend_seq_lens_cpu=[n for *_, n in reqs],
        )
        self.backend.init_forward_metadata(fb)
        outs = {rid: [] for _, rid, _, _ in reqs}
        for li, layer in enumerate(self.layers):
            q = torch.cat([data[rid][li][0][s:s + n] for _, rid, s, n in reqs])
            k = torch.cat([data[rid][li][1][s:s + n] for _, rid, s, n in reqs])
            v = torch.cat([data[rid][li][2][s:s + n] for _, rid, s, n in reqs])
            fn = self.backend.forward_decode if mode == "DECODE" else self.backend.forward_extend
            o = fn(q.view(q.shape[0], -1), k, v, layer, fb).view(-1, Hq, self.D)
            r = 0
            for _, rid, s, n in reqs:
                outs[rid].append(o[r:r + n])
                r += n
        return outs


def make_data(lengths, seed=0, head_dim=D, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    d = head_dim
    return {rid: [tuple(x.to(dtype) for x in (torch.randn(n, Hq, d, generator=gen), torch.randn(n, H, d, generator=gen),
                                             torch.randn(n, H, d, generator=gen))) for _ in range(LAYERS)]
            for rid, n in enumerate(lengths)}


def one_extend(data, lengths, P=32, head_dim=D):
    """Reference: every sequence as one cold EXTEND."""
    sim = Sim(P=P, head_dim=head_dim)
    return sim.forward("EXTEND", [(i + 1, i, 0, n) for i, n in enumerate(lengths)], data)


def check(out, ref, rid, start, n):
    for li in range(LAYERS):
        torch.testing.assert_close(out[rid][li], ref[rid][li][start:start + n], atol=ATOL, rtol=0)


def test_extend_then_decode_equals_one_extend():
    prompts, steps = [5, 37, 64], 40  # decode crosses page boundaries (P=32), one prompt ends on a page boundary
    lengths = [p + steps for p in prompts]
    data = make_data(lengths)
    ref = one_extend(data, lengths)
    sim = Sim()
    out = sim.forward("EXTEND", [(i + 1, i, 0, p) for i, p in enumerate(prompts)], data)
    for i, p in enumerate(prompts):
        check(out, ref, i, 0, p)
    for t in range(steps):
        out = sim.forward("DECODE", [(i + 1, i, p + t, 1) for i, p in enumerate(prompts)], data)
        for i, p in enumerate(prompts):
            check(out, ref, i, p + t, 1)


def test_chunked_prefill_equals_one_extend():
    lengths = [91, 70]
    data = make_data(lengths, seed=1)
    ref = one_extend(data, lengths)
    sim = Sim()
    # chunk boundaries inside pages, batched together: 23 | 50 | 18 for request 0, 33 | 37 for request 1 (a chunk
    # that starts one token into a page and completes it)
    for chunk in ([(1, 0, 0, 23), (2, 1, 0, 33)], [(1, 0, 23, 50), (2, 1, 33, 37)], [(1, 0, 73, 18)]):
        out = sim.forward("EXTEND", chunk, data)
        for _, rid, s, n in chunk:
            check(out, ref, rid, s, n)


def test_long_prefill_rereads_the_first_page_before_the_ring_wraps():
    """A chunk spanning > R pages overwrites the ring entry of its first (straddling) page: the earlier part of that
    page must be read before the ring writes, for both the attention and the quantization."""
    lengths = [10 + 5 * 32 + 1]
    data = make_data(lengths, seed=2)
    ref = one_extend(data, lengths)
    sim = Sim()
    for s, n in ((0, 10), (10, 5 * 32)):
        check(sim.forward("EXTEND", [(1, 0, s, n)], data), ref, 0, s, n)
    check(sim.forward("DECODE", [(1, 0, lengths[0] - 1, 1)], data), ref, 0, lengths[0] - 1, 1)


def test_batched_extend_kernel_equals_per_request_extend(monkeypatch):
    """The EXTEND path of the Triton engine (one launch for the batch: sgl_spec/kernels/extend_attention/triton.py,
    here under the interpreter) over chunks that start mid-page, span several pages and wrap the ring, against the
    per-request pure-torch path. Tolerance 1e-2: the kernel's dot operands are fp16."""
    import sgl_spec.kernels.extend_attention as xa

    lengths = [91, 170, 5]
    data = make_data(lengths, seed=4, head_dim=32)
    ref = one_extend(data, lengths, head_dim=32)
    sim = Sim(head_dim=32)
    sim.backend.prefill_engine = "triton"
    monkeypatch.setattr(xa, "use_triton", lambda t: True)
    for chunk in ([(1, 0, 0, 23), (2, 1, 0, 40), (3, 2, 0, 5)], [(1, 0, 23, 68), (2, 1, 40, 130)]):
        out = sim.forward("EXTEND", chunk, data)
        assert sim.backend.forward_metadata.plan is not None
        for _, rid, s, n in chunk:
            for li in range(LAYERS):
                torch.testing.assert_close(out[rid][li], ref[rid][li][s:s + n], atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("engine,field", [("fa3", "paged"), ("fa3_segments", "segments")])
def test_fa3_extend_engine_equals_per_request_extend(monkeypatch, engine, field):
    """The EXTEND path of the FA3 engines (sgl_spec/kernels/extend_attention/fa3.py: two calls merged;
    fa3_segments.py: one call; here FA3's entry points are tests/support/fa3_standin.py) over the same chunks,
    against the per-request pure-torch path: the plan, the dequantized copy, the own pages through the ring (and the
    merge). Tolerance 1e-2: fp16 operands."""
    import fa3_standin

    from sgl_spec.kernels.extend_attention import fa3

    lengths = [91, 170, 5]
    data = make_data(lengths, seed=4, head_dim=32)
    ref = one_extend(data, lengths, head_dim=32)
    sim = Sim(head_dim=32)
    sim.backend.prefill_engine = engine
    monkeypatch.setattr(fa3, "_sgl_flash", lambda: fa3_standin)
    from sgl_spec.kernels.extend_attention import fa3_segments
    monkeypatch.setattr(fa3_segments, "_sgl_flash", lambda: fa3_standin)
    for chunk in ([(1, 0, 0, 23), (2, 1, 0, 40), (3, 2, 0, 5)], [(1, 0, 23, 68), (2, 1, 40, 130)]):
        out = sim.forward("EXTEND", chunk, data)
        assert getattr(sim.backend.forward_metadata, field) is not None
        for _, rid, s, n in chunk:
            for li in range(LAYERS):
                torch.testing.assert_close(out[rid][li], ref[rid][li][s:s + n], atol=1e-2, rtol=1e-2)


def test_prefix_hit_equals_cold_extend():
    n = 3 * 32 + 7
    data = make_data([n, n], seed=3)
    data[1] = data[0]  # request 1 is the same token sequence
    ref = one_extend(data, [n, n])
    sim = Sim()
    sim.forward("EXTEND", [(1, 0, 0, n)], data)
    # radix hit: request 1 reuses request 0's first 3 (complete, already quantized) pages
    sim.rtt[2, :3 * 32] = sim.rtt[1, :3 * 32]
    out = sim.forward("EXTEND", [(2, 1, 3 * 32, n - 3 * 32)], data)
    check(out, ref, 1, 3 * 32, n - 3 * 32)
    assert torch.equal(sim.rtt[2, :96], sim.rtt[1, :96])


@pytest.mark.parametrize("prompt", [30, 32, 61])
def test_target_verify_windows_and_rollback(prompt):
    nq = 5
    n = prompt + 2 * nq
    data = make_data([n], seed=4)
    ref = one_extend(data, [n])
    sim = Sim(speculative=True)
    sim.forward("EXTEND", [(1, 0, 0, prompt)], data)
    # a rejected window: garbage K/V at prompt … prompt+4 (it may even complete and quantize a page) ...
    junk = {0: [(q, k * 7 + 3, v - 5) for q, k, v in data[0]]}
    sim.forward("TARGET_VERIFY", [(1, 0, prompt, nq)], junk)
    # ... is simply rewritten by the next window at the same positions
    out = sim.forward("TARGET_VERIFY", [(1, 0, prompt, nq)], data)
    check(out, ref, 0, prompt, nq)
    out = sim.forward("TARGET_VERIFY", [(1, 0, prompt + nq, nq)], data)
    check(out, ref, 0, prompt + nq, nq)
    # page scores: written for the complete pages before the window, for every layer
    npg = (prompt + nq) // 32
    scores = sim.backend.page_scores
    assert scores.shape[:2] == (LAYERS, 6)
    assert torch.isfinite(scores[:, 0, :, :npg]).all() and (scores[:, 0, :, :npg] != 0).all()


def _draft_reference(sim, layer, q, slot, window_start, pos, pages):
    """Upper-plane view of ``pages`` (physical ids, logical order) + ring tokens (window_start//P)*P … pos."""
    P = sim.P
    s = sim.pool.page_store(layer)
    ids = torch.tensor(pages, dtype=torch.long)
    k = dequant_keys_ref(s.k_upper[ids], s.k_lower[ids], s.k_scale[ids], s.k_zero[ids], True)
    v = dequant_values_ref(s.v_upper[ids], s.v_lower[ids], s.v_scale[ids], s.v_zero[ids], True)
    k, v = k.permute(1, 0, 2, 3).reshape(H, -1, D), v.permute(1, 0, 2, 3).reshape(H, -1, D)
    hk, hv = sim.pool.hot(layer)
    hot = torch.arange((window_start // P) * P, pos + 1)
    k = torch.cat([k, hk[slot, (hot // P) % 2, hot % P].permute(1, 0, 2)], 1)
    v = torch.cat([v, hv[slot, (hot // P) % 2, hot % P].permute(1, 0, 2)], 1)
    qg = q.view(H, Hq // H, D)
    p = torch.softmax(torch.einsum("hgd,htd->hgt", qg, k) * D ** -0.5, -1)
    return torch.einsum("hgt,htd->hgd", p, v).reshape(Hq, D)


@pytest.mark.parametrize("sparse", [False, True])
def test_drafting_reads_the_upper_plane_and_never_quantizes(sparse):
    P, prompt = 32, 4 * 32 + 29  # the 3-token draft completes page 4 (positions 157, 158, 159)
    data = make_data([prompt + 3], seed=5)
    sim = Sim(speculative=True)
    sim.forward("EXTEND", [(1, 0, 0, prompt)], data)
    before = [{f: getattr(sim.pool.page_store(li), f).clone() for f in ("k_upper", "k_lower", "v_scale")}
              for li in range(LAYERS)]
    page_of = [int(sim.rtt[1, j * P]) // P for j in range(4)]
    pick = [[0, 2], [3]]  # per layer, logical pages of a sparse draft
    ws = torch.tensor([prompt])
    if sparse:
        ids = torch.zeros((LAYERS, 1, 4), dtype=torch.int32)
        cnt = torch.tensor([[len(p)] for p in pick], dtype=torch.int32)
        for li, p in enumerate(pick):
            ids[li, 0, :len(p)] = torch.tensor([page_of[j] for j in p], dtype=torch.int32)
        ctx = sim.backend.draft_mode(ws, ids, cnt)
    else:
        ctx = sim.backend.draft_mode(ws)
    with ctx:
        assert sim.backend.is_drafting
        for t in range(3):
            out = sim.forward("DECODE", [(1, 0, prompt + t, 1)], data)
            for li in range(LAYERS):
                pages = [page_of[j] for j in pick[li]] if sparse else page_of
                want = _draft_reference(sim, li, data[0][li][0][prompt + t], 1, prompt, prompt + t, pages)
                torch.testing.assert_close(out[0][li][0], want, atol=ATOL, rtol=0)
    assert not sim.backend.is_drafting
    for li in range(LAYERS):
        for f, t in before[li].items():
            assert torch.equal(getattr(sim.pool.page_store(li), f), t), "a draft pass quantized a page"


def test_decode_quantizes_exactly_the_completed_page():
    P = 32
    data = make_data([2 * P], seed=6)
    sim = Sim()
    sim.forward("EXTEND", [(1, 0, 0, P - 2)], data)
    store = sim.pool.page_store(0)
    page0 = int(sim.rtt[1, 0]) // P
    assert (store.k_scale[page0] == 0).all()  # incomplete: not quantized yet
    sim.forward("DECODE", [(1, 0, P - 2, 1)], data)
    assert (store.k_scale[page0] == 0).all()
    sim.forward("DECODE", [(1, 0, P - 1, 1)], data)  # its last token
    assert (store.k_scale[page0] != 0).all()


def test_draft_kernel_resolution():
    """--quantspec-draft-kernel: 'auto' falls back to the Triton draft kernel where Gluon cannot run (here: the CPU,
    head_dim 16), 'triton' is taken as given, and 'gluon' that cannot run fails at startup with the reason."""
    import dataclasses

    sim = Sim(P=64, speculative=True)
    assert sim.backend.draft_engine == "triton"  # auto on the CPU
    runner = SimpleNamespace(device="cpu", req_to_token_pool=SimpleNamespace(req_to_token=sim.rtt),
                             token_to_kv_pool=sim.pool, model_config=SimpleNamespace(num_attention_heads=Hq))
    cfg = dataclasses.replace(sim.backend.cfg, draft_kernel="triton")
    assert QuantSpecAttnBackend(runner, "torch_native", cfg).draft_engine == "triton"
    cfg = dataclasses.replace(sim.backend.cfg, draft_kernel="gluon")
    with pytest.raises(ValueError, match="--quantspec-draft-kernel gluon: the Gluon draft kernel covers page size "
                                         "64 or 128 and head_dim 128, not 64 / 16; use --quantspec-draft-kernel "
                                         "triton"):
        QuantSpecAttnBackend(runner, "torch_native", cfg)


def test_gluon_draft_support_reasons():
    from sgl_spec.kernels.draft_decode.launch import gluon_draft_support

    assert "page size 64 or 128 and head_dim 128" in gluon_draft_support("cpu", 32, 128, 4)
    assert "needs a CUDA device" in gluon_draft_support("cpu", 128, 128, 4)  # 128: two 64-token sub-pages
    assert "up to 8 query heads" in gluon_draft_support("cpu", 64, 128, 16)
    assert "needs a CUDA device" in gluon_draft_support("cpu", 64, 128, 4)
    import triton
    from unittest import mock

    import os

    cuda = torch.device("cuda", 0)  # the rest of the checks, with the device's answers faked, compiled (not interpreted)
    with mock.patch.dict(os.environ, {"TRITON_INTERPRET": "0"}), \
            mock.patch.object(torch.cuda, "get_device_capability", return_value=(8, 0)):
        assert "compute capability 9.0" in gluon_draft_support(cuda, 64, 128, 4)
    with mock.patch.dict(os.environ, {"TRITON_INTERPRET": "0"}), \
            mock.patch.object(torch.cuda, "get_device_capability", return_value=(9, 0)):
        with mock.patch.object(triton, "__version__", "3.6.0"):  # the Triton the kernel is written for: it runs
            assert gluon_draft_support(cuda, 64, 128, 4) == ""
        with mock.patch.object(triton, "__version__", "3.5.0"):
            assert "written for Triton 3.6, not 3.5.0" in gluon_draft_support(cuda, 64, 128, 4)


def test_verify_kernel_resolution():
    """--quantspec-verify-kernel: 'auto' falls back to the Triton verify kernel where Gluon cannot run (here: the
    CPU, head_dim 16), without speculation too (INT8 decode); 'gluon' that cannot run fails at startup with the
    reason; a window wider than the Gluon tile gets no engine keyword (the Triton kernel)."""
    import dataclasses

    sim = Sim(P=64, speculative=True)
    assert sim.backend.verify_engine == "triton"  # auto on the CPU
    assert Sim(P=64, speculative=False).backend.verify_engine == "triton"
    runner = SimpleNamespace(device="cpu", req_to_token_pool=SimpleNamespace(req_to_token=sim.rtt),
                             token_to_kv_pool=sim.pool, model_config=SimpleNamespace(num_attention_heads=Hq))
    cfg = dataclasses.replace(sim.backend.cfg, verify_kernel="gluon")
    with pytest.raises(ValueError, match="--quantspec-verify-kernel gluon: the Gluon verify kernel covers page size "
                                         "64 or 128 and head_dim 128, not 64 / 16; use --quantspec-verify-kernel "
                                         "triton"):
        QuantSpecAttnBackend(runner, "torch_native", cfg)
    be = sim.backend
    be.verify_engine = "gluon"  # as resolved on an H100 (auto: from auto_min_pairs(G) pairs a launch)
    assert be.verify_min_pairs == auto_min_pairs(Hq // H) == 32  # G = 2 here; Llama-3-8B's G = 4: every launch
    assert auto_min_pairs(4) == 1 and auto_min_pairs(8) == 1
    assert be._verify_kw(5, 4, 32) == {"engine": "gluon"} and be._verify_kw(9, 4, 32) == {}
    assert be._verify_kw(5, 4, 16) == {} and be._verify_kw(5, 4, 8) == {}
    be.verify_min_pairs = 0  # --quantspec-verify-kernel gluon
    assert be._verify_kw(5, 4, 8) == {"engine": "gluon"}


def test_deterministic_inference_fixes_the_verify_engine(monkeypatch):
    """With --enable-deterministic-inference 'auto' must not pick the verify engine by batch size (the Triton and
    Gluon kernels sum a request's pages in different orders): where Gluon runs it takes every launch."""
    from sgl_spec.kernels.verify_attention import gluon_rules as vgr

    sim = Sim(P=64, speculative=True)
    be = sim.backend
    runner = SimpleNamespace(device="cpu", req_to_token_pool=SimpleNamespace(req_to_token=sim.rtt),
                             token_to_kv_pool=sim.pool, model_config=SimpleNamespace(num_attention_heads=Hq))
    monkeypatch.setattr(vgr, "gluon_verify_support", lambda *a: "")  # as on an H100
    for invariant, pairs in ((False, auto_min_pairs(Hq // H)), (True, 0)):
        be.batch_invariant = invariant
        assert be._resolve_verify_engine(runner, sim.pool) == "gluon"
        assert be.verify_min_pairs == pairs


def test_prefill_engine_knob(monkeypatch):
    """SGL_SPEC_PREFILL (benchmarking) forces the EXTEND engine; the CPU and deterministic inference always take the
    per-request torch path; an unknown value stops startup naming the choices. (CUDA's default, FA3 else Triton:
    tests/server/test_server_gpu.py.)"""
    from sgl_spec.kernels.engine import PREFILL_ENV, prefill_engine

    monkeypatch.delenv(PREFILL_ENV, raising=False)
    assert prefill_engine("cpu") == "torch"
    for want in ("fa3", "fa3_segments", "triton", "torch"):
        monkeypatch.setenv(PREFILL_ENV, want)
        assert prefill_engine("cpu") == "torch"
    monkeypatch.setenv(PREFILL_ENV, "flash")
    with pytest.raises(ValueError, match="fa3, fa3_segments, triton, torch"):
        prefill_engine("cpu")


@pytest.mark.parametrize("cap,fa3_imports,want", [((9, 0), True, "fa3"), ((9, 0), False, "triton"),
                                                  ((8, 0), True, "triton")])
def test_prefill_engine_default_on_cuda(monkeypatch, cap, fa3_imports, want):
    """CUDA's EXTEND engine: FA3 on sm_90+ where SGLang's FlashAttention-3 imports, else Triton; deterministic
    inference keeps the torch path; the knob still forces an engine."""
    from types import SimpleNamespace

    import torch

    from sgl_spec.kernels import engine

    def flash_attention():
        if not fa3_imports:
            raise ImportError("no sgl_kernel")
        return SimpleNamespace()

    monkeypatch.delenv(engine.PREFILL_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: cap)
    import sgl_spec.patches as patches

    monkeypatch.setattr(patches, "sglang", lambda: SimpleNamespace(flash_attention=flash_attention))
    assert engine.prefill_engine("cuda") == want
    assert engine.prefill_engine("cuda", batch_invariant=True) == "torch"
    monkeypatch.setenv(engine.PREFILL_ENV, "torch")
    assert engine.prefill_engine("cuda") == "torch"


@pytest.mark.parametrize("engine", ["fa3", "fa3_segments"])
def test_batched_extend_host_work_does_not_grow_with_the_batch(monkeypatch, engine):
    """The batched EXTEND engines issue the same torch ops a layer whether the batch holds 2 or 8 requests (chunks
    that start on a page boundary, as radix hits and page-aligned chunked prefill do): no per-request host loop per
    layer, where a long prompt's prefill is host-bound. FA3's entry points (the stand-in) count as one op each."""
    import collections

    import fa3_standin
    from torch.utils._python_dispatch import TorchDispatchMode

    from sgl_spec.kernels.extend_attention import fa3, fa3_segments

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops, self.on = collections.Counter(), True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if self.on:
                self.ops[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    mode = Count()

    class OneOp:
        def __getattr__(self, name):
            def call(*a, **kw):
                mode.on = False
                try:
                    return getattr(fa3_standin, name)(*a, **kw)
                finally:
                    mode.on = True
                    mode.ops["fa3." + name] += 1
            return call

    monkeypatch.setattr(fa3, "_sgl_flash", lambda: OneOp())
    monkeypatch.setattr(fa3_segments, "_sgl_flash", lambda: OneOp())

    def ops_a_layer(batch):
        data = make_data([96] * batch, seed=5)
        sim = Sim(num_pages=60, slots=batch + 1)
        sim.backend.prefill_engine = engine
        extend = sim.backend.forward_extend

        def counted(*a, **kw):
            with mode:
                return extend(*a, **kw)

        sim.backend.forward_extend = counted
        mode.ops.clear()
        sim.forward("EXTEND", [(i + 1, i, 0, 64) for i in range(batch)], data)  # first chunk: two pages each
        sim.forward("EXTEND", [(i + 1, i, 64, 32) for i in range(batch)], data)  # a page-aligned continuation
        return {op: n / LAYERS for op, n in mode.ops.items()}

    two, eight = ops_a_layer(2), ops_a_layer(8)
    assert two == eight, {op: (two.get(op), eight.get(op)) for op in set(two) | set(eight)
                          if two.get(op) != eight.get(op)}


# The draft's split count follows the batch size (draft_decode/launch.py num_splits_for); its merge kernel's tile
# (BLOCK_S, CHUNK) is the power of two above the partial count: at most 8 small variants over a server's life, and
# those of the captured batch sizes compile while SGLang captures the draft CUDA graphs. Every other parameter of
# every kernel must specialize the same way whatever the batch and the lengths.
DRAFT_SPLIT_CHOICES = {"BLOCK_S", "CHUNK"}
TRITON_OPS = ("argmax_rows", "draft_decode", "extend_attention", "quantize_pages", "ring_write", "select_topk_pages",
              "verify_attention", "dequant_pages", "window_meta")


@pytest.mark.interp
def test_kernel_variants_do_not_depend_on_batch_or_lengths(monkeypatch):
    """One server's decode path (prefill, sparse-draft rounds with the top-k page policy, verifies, a plain decode
    step) at batch 2, 1 and 3 with different lengths, every op on its Triton kernel (under the interpreter): the
    specialization key of each launch, as Triton computes it for an H100 (tests/support/compile_keys.py), may differ
    between batches only in the draft's split choice. Any other difference is a kernel variant that compiles the
    first time a batch size or length shows up while the server is serving."""
    import importlib
    import random

    import compile_keys
    from sgl_spec.pages import policies as pagetable

    for op in TRITON_OPS:
        monkeypatch.setattr(importlib.import_module(f"sgl_spec.kernels.{op}"), "use_triton", lambda t: True)
    P, d, G, max_b = 32, 32, 4, 3
    sim = Sim(P=P, num_pages=120, slots=max_b + 2, ctx=384, speculative=True, head_dim=d, dtype=torch.bfloat16)
    sim.backend.prefill_engine = "triton"
    pages = pagetable.draft_pages(sim.backend)

    def serve(B, ctx, seed):
        lengths = [ctx + 7 * i for i in range(B)]
        data = make_data([n + 2 * (G + 1) + 2 for n in lengths], seed=seed, head_dim=d, dtype=torch.bfloat16)
        slots = [1 + (seed + i) % (max_b + 1) for i in range(B)]
        sim.forward("EXTEND", [(s, i, 0, n) for i, (s, n) in enumerate(zip(slots, lengths))], data)
        rpi, seq, rng = torch.tensor(slots), list(lengths), random.Random(seed)
        for r in range(2):
            ws = torch.tensor(seq)
            ids, cnt = pages.for_round(rpi, ws, torch.tensor([r > 0] * B))
            with sim.backend.draft_mode(ws, ids, cnt):
                for t in range(G):
                    sim.forward("DECODE", [(s, i, seq[i] + t, 1) for i, s in enumerate(slots)], data)
            sim.forward("TARGET_VERIFY", [(s, i, seq[i], G + 1) for i, s in enumerate(slots)], data)
            new = [n + rng.randint(1, G + 1) for n in seq]
            pages.after_verify(rpi, ws, torch.tensor(new))
            seq = new
        sim.forward("DECODE", [(s, i, seq[i], 1) for i, s in enumerate(slots)], data)  # a plain step
        freed = {int(x) // P for s in slots for x in sim.rtt[s] if int(x)}
        sim.rtt[slots] = 0
        sim.free += sorted(freed)

    def strip(key):
        return tuple(kv for kv in key if kv[0] not in DRAFT_SPLIT_CHOICES)

    seen = []
    for B, ctx, seed in ((2, 200, 1), (1, 233, 2), (3, 265, 3)):
        with compile_keys.record() as keys:
            serve(B, ctx, seed)
        seen.append((B, {name: {strip(k) for k in ks} for name, ks in keys.items()}))
    (_, first), *rest = seen
    assert {"_draft_decode_kernel", "_verify_attention_kernel", "_select_topk_pages_kernel"} <= set(first)
    for B, got in rest:
        assert set(got) == set(first), f"batch {B} launched other kernels: {set(got) ^ set(first)}"
        for name, ks in got.items():
            for k in ks - first[name]:
                near = min(first[name], key=lambda b: len(compile_keys.describe(b, k)))
                pytest.fail(f"{name} at batch {B} compiles another variant: {compile_keys.describe(near, k)}")
