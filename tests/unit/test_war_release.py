"""sgl_spec/speculative/war_release.py: which rounds let SGLang's overlap scheduler prepare the next batch early, and the pieces
that make the early start possible (no host copy of the lengths, the timer's pending rounds)."""
from types import SimpleNamespace

import torch

from sgl_spec.patches import sglang
from sgl_spec.speculative import phase_timer
from sgl_spec.speculative import war_release
from sgl_spec.speculative.worker import QuantSpecWorker


def _batch(**kw):
    si = SimpleNamespace(acc_additive_penalties=None, acc_scaling_penalties=None, has_custom_logit_processor=False,
                         penalizer_orchestrator=SimpleNamespace(is_required=False))
    for k in list(kw):
        if hasattr(si, k):
            setattr(si, k, kw.pop(k))
    return SimpleNamespace(**{"has_grammar": False, "return_logprob": False, "sampling_info": si, **kw})


def test_overlap_safe_only_without_in_place_or_host_state():
    assert war_release.overlap_safe(_batch())
    assert war_release.overlap_safe(SimpleNamespace(sampling_info=None))
    assert not war_release.overlap_safe(_batch(has_grammar=True))
    assert not war_release.overlap_safe(_batch(return_logprob=True))
    assert not war_release.overlap_safe(_batch(acc_additive_penalties=torch.zeros(2, 8)))
    assert not war_release.overlap_safe(_batch(acc_scaling_penalties=torch.ones(2, 8)))
    assert not war_release.overlap_safe(_batch(has_custom_logit_processor=True))
    assert not war_release.overlap_safe(_batch(penalizer_orchestrator=SimpleNamespace(is_required=True)))


def test_record_and_publish_keep_the_whole_forward_barrier_off_cuda():
    assert war_release.record(_batch(), torch.device("cpu")) is None
    event = sglang().READ_DONE_EVENT  # the release's ModelRunner attribute, None until a forward publishes one
    runner = SimpleNamespace(**{event: None})
    war_release.publish(runner, None)
    assert getattr(runner, event) is None
    war_release.publish(runner, "event")
    assert getattr(runner, event) == "event"


def test_backend_needs_no_host_copy_of_the_lengths():
    from sgl_spec.kvcache.backend import QuantSpecAttnBackend

    assert QuantSpecAttnBackend.needs_cpu_seq_lens is False


def test_kv_tokens_without_host_lengths_counts_the_requests_tokens():
    reqs = [SimpleNamespace(origin_input_ids=[1] * 5, output_ids=[2] * 3), SimpleNamespace(origin_input_ids=[1] * 7,
                                                                                           output_ids=[])]
    b = SimpleNamespace(seq_lens_sum=None, seq_lens_cpu=None, reqs=reqs)
    assert QuantSpecWorker._kv_tokens(b) == 15
    b.seq_lens_cpu = torch.tensor([4, 6])
    assert QuantSpecWorker._kv_tokens(b) == 10
    b.seq_lens_sum = 11
    assert QuantSpecWorker._kv_tokens(b) == 11


class _Event:
    """A CUDA event stand-in: complete once its round is released; elapsed_time refuses otherwise, as CUDA does."""

    def __init__(self, t, gate):
        self.t, self.gate = t, gate

    def query(self):
        return self.gate["done"]

    def elapsed_time(self, other):
        assert self.gate["done"] and other.gate["done"], "read before the round completed"
        return other.t - self.t


def test_timer_reads_a_round_only_once_its_events_completed(monkeypatch):
    t = phase_timer.PhaseTimer(every=100, cuda=True)
    clock = iter(range(0, 10000, 2))
    gates = []

    def event():
        if not gates or t._marks == []:
            gates.append({"done": False})
        return _Event(next(clock), gates[-1])

    monkeypatch.setattr(t, "_event", event)
    for _ in range(2):  # round 2 starts while round 1 is still running on the GPU
        t.start(bs=1)
        t.mark("draft")
        t.end()
    assert t._gpu_rounds == 0 and len(t._pending) == 2
    gates[0]["done"] = True
    t.start(bs=1)  # round 1 is read now; round 2 stays pending
    assert t._gpu_rounds == 1 and len(t._pending) == 1 and t._gpu["draft"] == 2e-3
