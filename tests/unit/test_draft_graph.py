"""sgl_spec/speculative/draft_graph.py pieces that need no SGLang model runner (the server path: test_draft_graph_server.py).

A captured draft graph reads SGLang's padded static buffers (slot 0, position 0 past the live rows) and the backend's
draft tensors from ``DraftStatics``; replaying it must give the live rows exactly what an eager draft forward gives
them, and the padded rows must touch nothing but the trash slot 0.
"""
from types import SimpleNamespace

import pytest
import torch

from sgl_spec.patches import sglang
from sgl_spec.speculative import draft_graph
from sgl_spec.speculative.draft_graph import DraftStatics

from test_backend import LAYERS, Hq, Sim, _mode, make_data

P, KCAP = 32, 4
PROMPTS = {1: 4 * P + 29, 3: 2 * P + 5}  # slot -> prompt length (rid = index)


def _sims():
    data = make_data(list(v + 3 for v in PROMPTS.values()), seed=9)
    sims = []
    for _ in range(2):  # identical twins: same page allocation order, same data
        sim = Sim(speculative=True)
        sim.forward("EXTEND", [(s, i, 0, n) for i, (s, n) in enumerate(PROMPTS.items())], data)
        for s, n in PROMPTS.items():
            sim.alloc(s, n + 3)
        sims.append(sim)
    return sims, data


def _pages(sim):
    """A sparse page list per layer and request: some of each request's complete pages."""
    ids = torch.zeros((LAYERS, len(PROMPTS), KCAP), dtype=torch.int32)
    cnt = torch.zeros((LAYERS, len(PROMPTS)), dtype=torch.int32)
    for b, (s, n) in enumerate(PROMPTS.items()):
        pages = [int(sim.rtt[s, j * P]) // P for j in range(n // P)]
        for li in range(LAYERS):
            pick = pages[li::2][:KCAP]
            ids[li, b, :len(pick)] = torch.tensor(pick, dtype=torch.int32)
            cnt[li, b] = len(pick)
    return ids, cnt


def _draft_step(sim, data, t, pad_to=None):
    """One draft DECODE forward of every request at position prompt + t, optionally padded like SGLang's graph
    buffers (slot 0, position 0, zero q/k/v rows). Returns the per-layer outputs of the live rows."""
    slots = list(PROMPTS)
    pos = [PROMPTS[s] + t for s in slots]
    n_pad = (pad_to or len(slots)) - len(slots)
    fb = SimpleNamespace(forward_mode=_mode("DECODE"), batch_size=len(slots) + n_pad,
                         req_pool_indices=torch.tensor(slots + [0] * n_pad), positions=torch.tensor(pos + [0] * n_pad))
    sim.backend.init_forward_metadata(fb)
    outs = []
    for li, layer in enumerate(sim.layers):
        q, k, v = (torch.cat([data[i][li][f][p:p + 1] for i, p in enumerate(pos)]) for f in range(3))
        q, k, v = (torch.cat([x, x.new_zeros((n_pad,) + x.shape[1:])]) for x in (q, k, v))
        o = sim.backend.forward_decode(q.reshape(q.shape[0], -1), k, v, layer, fb)
        outs.append(o.view(-1, Hq, q.shape[-1])[:len(slots)])
    return outs


@pytest.mark.parametrize("sparse", [False, True])
def test_static_padded_replay_equals_the_live_draft(sparse):
    (live, static), data = _sims()
    ws = torch.tensor(list(PROMPTS.values()))
    ids, cnt = _pages(live) if sparse else (None, None)
    st = DraftStatics(max_bs=8, num_layers=LAYERS, kcap=KCAP if sparse else None, device="cpu")
    if sparse:
        st.num_pages.fill_(7)  # stale values from an earlier replay
    pages_before = [static.pool.page_store(li).k_upper.clone() for li in range(LAYERS)]
    for t in range(3):
        with live.backend.draft_mode(ws, ids, cnt):
            want = _draft_step(live, data, t)
        # replay: the worker's draft_mode is open with the live tensors; the graph reads only the statics
        with static.backend.draft_mode(ws, ids, cnt):
            st.load(static.backend.draft_state, raw_bs=len(PROMPTS), bs=4)
        with st.scope(static.backend, 4):
            got = _draft_step(static, data, t, pad_to=4)
        for li in range(LAYERS):
            torch.testing.assert_close(got[li], want[li], atol=1e-6, rtol=0)
    if sparse:
        assert st.num_pages[:, 2:4].eq(0).all() and st.num_pages[:, 4:].eq(7).all()
    for li in range(LAYERS):
        assert torch.equal(static.pool.page_store(li).k_upper, pages_before[li]), "a draft quantized a page"
        hot_live, hot_static = live.pool.hot(li)[0], static.pool.hot(li)[0]
        for s in PROMPTS:  # padded rows wrote the trash slot 0 only
            assert torch.equal(hot_live[s], hot_static[s])


def test_statics_match_only_the_captured_layout():
    sparse = DraftStatics(max_bs=4, num_layers=2, kcap=3, device="cpu")
    dense = DraftStatics(max_bs=4, num_layers=2, kcap=None, device="cpu")
    ws = torch.zeros(2, dtype=torch.int64)
    d_dense = SimpleNamespace(window_start=ws, page_ids=None, num_pages=None)
    d_sparse = SimpleNamespace(window_start=ws, page_ids=torch.zeros((2, 2, 3), dtype=torch.int32),
                               num_pages=torch.zeros((2, 2), dtype=torch.int32))
    d_wide = SimpleNamespace(window_start=ws, page_ids=torch.zeros((2, 2, 5), dtype=torch.int32),
                             num_pages=torch.zeros((2, 2), dtype=torch.int32))
    assert dense.matches(d_dense) and not dense.matches(d_sparse) and not dense.matches(None)
    assert sparse.matches(d_sparse) and not sparse.matches(d_dense) and not sparse.matches(d_wide)
    ws4, ids4, n4 = sparse.views(3)
    assert ws4.shape == (3,) and ids4.shape == (2, 3, 3) and n4.shape == (2, 3)
    assert ids4[1].is_contiguous() and n4[1].is_contiguous()  # what draft_decode gets per layer


def test_statics_load_once_per_draft_block():
    """The γ steps of a round replay with the same draft block: only its first step copies."""
    st = DraftStatics(max_bs=4, num_layers=2, kcap=3, device="cpu")
    d = SimpleNamespace(window_start=torch.tensor([5, 9]), page_ids=torch.ones((2, 2, 3), dtype=torch.int32),
                        num_pages=torch.full((2, 2), 3, dtype=torch.int32))
    st.load(d, 2, 4)
    st.window_start.fill_(-1)  # would be restored by a second copy
    st.load(d, 2, 4)
    assert st.loads == 1 and st.window_start.eq(-1).all()
    st.load(d, 2, 2)  # another padding: copies
    assert st.loads == 2 and st.window_start[:2].tolist() == [5, 9]
    d2 = SimpleNamespace(window_start=torch.tensor([6, 10]), page_ids=d.page_ids, num_pages=d.num_pages)
    st.load(d2, 2, 2)  # the next round's block: copies
    assert st.loads == 3 and st.window_start[:2].tolist() == [6, 10]


def test_routed_swaps_the_runner_and_restores_the_war_event():
    verify_runner, draft_runner = object(), object()
    event = sglang().READ_DONE_EVENT  # the release's ModelRunner attribute, None until a forward publishes one
    mr = SimpleNamespace(decode_cuda_graph_runner=verify_runner, **{event: None})
    with draft_graph.routed(draft_runner, mr):
        assert mr.decode_cuda_graph_runner is draft_runner
        setattr(mr, event, "published by a draft replay")
    assert mr.decode_cuda_graph_runner is verify_runner and getattr(mr, event) is None
    with pytest.raises(RuntimeError):
        with draft_graph.routed(draft_runner, mr):
            raise RuntimeError("forward failed")
    assert mr.decode_cuda_graph_runner is verify_runner
    with draft_graph.routed(None, mr):  # no graphs: nothing changes
        assert mr.decode_cuda_graph_runner is verify_runner


def test_an_eager_replay_off_cuda_asks_the_devices_own_module():
    """SGLang's capture machinery asks the runner's device module whether a stream is being captured (torch.cpu does
    not say: an eager replay captures none) and orders the capture after torch's default accelerator's current
    stream (CUDA in a CUDA build of torch, even on a CPU server): both answered by the device's own module, and the
    stream lookup is SGLang's again after the capture."""
    from sglang.srt.distributed import parallel_state

    dev = draft_graph._UncapturedDevice(torch.cpu)
    assert dev.is_current_stream_capturing() is False and dev.Event is torch.cpu.Event
    sglangs = parallel_state.get_current_device_stream_fast
    with draft_graph._current_streams_of(dev):
        assert isinstance(parallel_state.get_current_device_stream_fast(), torch.cpu.Stream)
    assert parallel_state.get_current_device_stream_fast is sglangs
    with pytest.raises(RuntimeError):
        with draft_graph._current_streams_of(dev):
            raise RuntimeError("capture failed")
    assert parallel_state.get_current_device_stream_fast is sglangs


def test_debug_knob_values(monkeypatch):
    for value, mode in (("off", "off"), ("EAGER", "eager"), ("on", "on")):
        monkeypatch.setenv(draft_graph.ENV, value)
        assert draft_graph._mode() == mode
    monkeypatch.setenv(draft_graph.ENV, "1")
    with pytest.raises(ValueError):
        draft_graph._mode()
