"""QuantSpecWorker under SGLang's overlap scheduler, emulated with SGLang's own FutureMap and relay functions
(resolve_seq_lens_cpu, resolve_forward_inputs, RelayPayload, stash/publish): lengths and last tokens reach a step only
through the FutureMap, the batch is filtered and merged on its future indices, and step k's results are processed
after step k+1 was launched. The fake target and toy LM are test_worker.py's."""
import dataclasses
from types import SimpleNamespace

import pytest
import torch

from sglang.srt.model_executor.forward_batch_info import ForwardMode

from toy_worker import MAX_CTX, Batch, FakeTargetWorker, ToyLM, make_sampling_info, make_worker, reference_greedy


def _restore(batch, snapshot):
    """SGLang's _forward_isolation: every field of the batch back to its value before the forward."""
    for f in dataclasses.fields(batch):
        setattr(batch, f.name, getattr(snapshot, f.name))


class OverlapScheduler:
    """SGLang 0.5.17's overlap run_batch for a spec-v2 worker, with its own FutureMap and relay functions: lengths are
    published by the worker (on_publish) and gathered before the next forward, the last tokens are stashed from
    next_draft_input and gathered into it, and step k's results are processed after step k+1 was launched."""

    def __init__(self, worker, req_to_token, needs_cpu_seq_lens=True):
        from sglang.srt.managers.overlap_utils import FutureMap

        self.algo = SimpleNamespace(is_none=lambda: False, is_some=lambda: True, is_ngram=lambda: False,
                                    need_topk=lambda: False)
        self.fm = FutureMap(torch.device("cpu"), self.algo, SimpleNamespace(req_to_token=req_to_token),
                            needs_cpu_seq_lens=needs_cpu_seq_lens)
        self.worker, self.req_to_token = worker, req_to_token
        self.outs = {}  # slot -> emitted tokens
        self.pending = None  # (slots, result) launched but not processed yet

    def prefill(self, prompts, slots):
        lens, rpi = torch.tensor([len(p) for p in prompts]), torch.tensor(slots)
        batch = Batch(
            reqs=[SimpleNamespace(output_ids=[], origin_input_ids=p) for p in prompts],
            forward_mode=ForwardMode.EXTEND, seq_lens=lens.clone(), seq_lens_cpu=lens.clone(), req_pool_indices=rpi,
            req_to_token_pool=SimpleNamespace(req_to_token=self.req_to_token),
            sampling_info=make_sampling_info(len(prompts)), input_ids=torch.tensor([t for p in prompts for t in p]),
            out_cache_loc=torch.cat([self.req_to_token[r, : len(p)].long() for r, p in zip(slots, prompts)]),
            enable_overlap=True, spec_algorithm=self.algo, req_pool_indices_cpu=rpi.clone(),
        )
        self.launch(batch)
        return batch

    def launch(self, batch):
        from functools import partial

        from sglang.srt.managers.overlap_utils import RelayPayload, resolve_forward_inputs

        self.fm.resolve_seq_lens_cpu(batch)
        resolve_forward_inputs(batch, self.fm)
        snapshot = dataclasses.replace(batch)
        fi = batch.req_pool_indices
        res = self.worker.forward_batch_generation(batch, on_publish=partial(self.fm.publish, fi))
        _restore(batch, snapshot)
        self.fm.stash(fi, RelayPayload.from_draft_input(res.next_draft_input))
        batch.input_ids = None
        batch.spec_info = res.next_draft_input
        batch.spec_info.future_indices = fi
        self.process()
        self.pending = (fi.tolist(), res)

    def process(self):
        if self.pending is None:
            return
        slots, res = self.pending
        ids = res.next_token_ids.tolist()
        if res.accept_lens is None:  # prefill: one token per request
            for s, t in zip(slots, ids):
                self.outs[s] = [t]
            return
        stride, acc = res.speculative_num_draft_tokens, res.accept_lens.tolist()
        for i, s in enumerate(slots):
            self.outs[s] += ids[i * stride : i * stride + acc[i]]

    def decode(self, batch):
        batch.forward_mode, batch.out_cache_loc = ForwardMode.DECODE, None
        batch.sampling_info = make_sampling_info(len(batch.reqs))
        self.launch(batch)

    @staticmethod
    def keep(batch, keep):
        """ScheduleBatch.filter_batch: the lengths stay stale (the next launch gathers them)."""
        idx = torch.tensor(keep)
        batch.reqs = [batch.reqs[i] for i in keep]
        batch.req_pool_indices, batch.req_pool_indices_cpu = batch.req_pool_indices[idx], batch.req_pool_indices_cpu[idx]
        batch.seq_lens = batch.seq_lens[idx]
        batch.seq_lens_cpu = None if batch.seq_lens_cpu is None else batch.seq_lens_cpu[idx]
        batch.spec_info.filter_batch(idx)

    @staticmethod
    def merge(batch, other):
        batch.reqs = batch.reqs + other.reqs
        for f in ("req_pool_indices", "req_pool_indices_cpu", "seq_lens", "seq_lens_cpu"):
            a, b = getattr(batch, f), getattr(other, f)
            setattr(batch, f, None if a is None or b is None else torch.cat([a, b]))
        batch.spec_info.merge_batch(other.spec_info)


@pytest.mark.parametrize("needs_cpu_seq_lens", [True, False])
def test_overlap_scheduling_through_sglangs_future_map(monkeypatch, needs_cpu_seq_lens):
    """Greedy output equals the autoregressive target while SGLang's overlap relay feeds the worker: requests leave
    the batch (filter) and join it (merge) between steps, and a joining request drafts from recent pages on its first
    round (per-slot flag) while the others keep theirs. needs_cpu_seq_lens=False is what the quantspec backend
    declares (no host copy of the lengths: the worker sees seq_lens_cpu = seq_lens_sum = None)."""
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, stream: None)  # a CUDA stream hint; CPU has none
    # reads the process-wide server args, which a unit test has none of; True is its answer for quantspec
    monkeypatch.setattr("sglang.srt.speculative.spec_utils.spec_need_hidden_states", lambda server_args=None: True)
    gamma, lm = 3, ToyLM(V=16, noise=2.0, seed=2)
    target = FakeTargetWorker(lm, num_slots=4096)
    worker = make_worker(gamma, target)
    g = torch.Generator().manual_seed(3)
    req_to_token = torch.randperm(4096, generator=g)[: 8 * MAX_CTX].view(8, MAX_CTX).int()
    sched = OverlapScheduler(worker, req_to_token, needs_cpu_seq_lens)
    prompts = {5: [3, 1, 4, 1, 5], 2: [9], 7: [2, 6, 5, 3, 5, 8, 9, 7, 9], 6: [7, 7, 1]}
    batch = sched.prefill([prompts[s] for s in (5, 2, 7)], [5, 2, 7])
    for _ in range(2):
        sched.decode(batch)
    assert (batch.seq_lens_cpu is None) == (not needs_cpu_seq_lens)  # what the worker saw
    sched.keep(batch, [0, 2])  # slot 2 leaves
    sched.decode(batch)
    joining = sched.prefill([prompts[6]], [6])
    assert worker._verified[[5, 7, 6]].tolist() == [True, True, False]
    sched.merge(batch, joining)
    for _ in range(3):
        sched.decode(batch)
    sched.process()
    assert batch.spec_info.future_indices.tolist() == [5, 7, 6]
    assert worker._verified[[5, 7, 6]].tolist() == [True, True, True]
    for slot, out in sched.outs.items():
        assert len(out) >= 2 and out == reference_greedy(lm, prompts[slot], len(out)), slot
    assert len(sched.outs[6]) >= 4 and len(sched.outs[5]) > len(sched.outs[2])
