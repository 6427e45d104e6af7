"""sgl_spec/speculative/penalties.py against SGLang's own penalizers, applied one token at a time (CPU, no server).

Every row of a speculative window must see the penalties autoregressive decoding would: SGLang's penalizer state after
the request's tokens so far plus the window's drafts before that row, applied penalizer by penalizer in the
orchestrator's order. The reference builds that state with SGLang's real penalizer classes (frequency, presence,
repetition, min_new_tokens) fed one token per step, as the non-speculative scheduler does.
"""
import types

import pytest
import torch

from sgl_spec.speculative import penalties

pen_lib = pytest.importorskip("sglang.srt.sampling.penaltylib")
rep_mod = pytest.importorskip("sglang.srt.sampling.penaltylib.repetition_penalty")

V = 50
STOP = 7  # every request's stop token (min_new_tokens)
ORDERS = [
    (pen_lib.BatchedFrequencyPenalizer, pen_lib.BatchedPresencePenalizer, pen_lib.BatchedRepetitionPenalizer,
     pen_lib.BatchedMinNewTokensPenalizer),
    (pen_lib.BatchedRepetitionPenalizer, pen_lib.BatchedMinNewTokensPenalizer, pen_lib.BatchedPresencePenalizer,
     pen_lib.BatchedFrequencyPenalizer),
]


@pytest.fixture(autouse=True)
def _eager_scaling(monkeypatch):
    """SGLang's repetition penalizer calls a torch.compile'd helper, which needs a C++ toolchain on CPU: the same
    arithmetic, eagerly."""
    def scale(logits, s):
        logits[:] = torch.where(logits < 0, logits * s, logits / s)
    monkeypatch.setattr(rep_mod, "apply_scaling_penalties", scale)


class _Orch:
    """The parts of BatchedPenalizerOrchestrator the penalizers and sgl_spec.speculative.penalties use."""

    def __init__(self, params, order):
        self.vocab_size, self.device, self.is_required = V, torch.device("cpu"), True
        # A Req's stop sources as SGLang's min_new_tokens penalizer reads them: the sampling params' stop ids, the
        # request's own eos ids (Req.eos_token_ids, None when the model names none) and the tokenizer's.
        self._reqs = [types.SimpleNamespace(
            sampling_params=types.SimpleNamespace(stop_token_ids={STOP}, **p), eos_token_ids=None,
            tokenizer=types.SimpleNamespace(additional_stop_token_ids=None, eos_token_id=None)) for p in params]
        self.penalizers = {cls: cls(self) for cls in order}
        for pen in self.penalizers.values():
            pen.prepare_if_required()

    def reqs(self):
        return self._reqs

    def feed(self, tokens):
        for pen in self.penalizers.values():
            pen.cumulate_output_tokens(output_ids=tokens)

    def apply(self, logits):
        for pen in self.penalizers.values():
            pen.apply(logits)


PARAMS = [dict(frequency_penalty=0.7, presence_penalty=0.0, repetition_penalty=1.0, min_new_tokens=0),
          dict(frequency_penalty=0.0, presence_penalty=1.3, repetition_penalty=1.0, min_new_tokens=6),
          dict(frequency_penalty=0.4, presence_penalty=0.9, repetition_penalty=1.7, min_new_tokens=3),
          dict(frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0, min_new_tokens=0)]


def _history(orch, hist):
    for t in range(hist.shape[1]):
        orch.feed(hist[:, t])


def _case(seed, R):
    g = torch.Generator().manual_seed(seed)
    B = len(PARAMS)
    hist = torch.randint(0, 12, (B, 4), generator=g)  # small ids: window tokens often repeat history tokens
    drafts = torch.randint(0, 12, (B, max(R - 1, 5)), generator=g)
    drafts[:, 1] = drafts[:, 0]  # a repeated draft inside the window
    drafts[0, 2] = STOP
    logits = torch.randn(B, max(R, 6), V, generator=g) * 3
    return hist, drafts, logits


@pytest.mark.parametrize("order", range(len(ORDERS)))
@pytest.mark.parametrize("R", [1, 2, 6])
def test_window_rows_equal_one_token_at_a_time(order, R):
    hist, drafts, logits = _case(order * 10 + R, R)
    drafts, logits = drafts[:, : R - 1], logits[:, :R].contiguous()
    got = logits.clone()
    orch = _Orch(PARAMS, ORDERS[order])
    _history(orch, hist)
    penalties.apply_window(orch, got, drafts)
    for r in range(R):
        ref_orch = _Orch(PARAMS, ORDERS[order])
        _history(ref_orch, hist)
        for j in range(r):
            ref_orch.feed(drafts[:, j])
        want = logits[:, r].clone()
        ref_orch.apply(want)
        # bit for bit: the same sums, in the same order, as feeding the tokens one at a time
        torch.testing.assert_close(got[:, r], want, rtol=0, atol=0, msg=f"row {r}")
    # apply_window reads the state, it does not change it
    fresh = _Orch(PARAMS, ORDERS[order])
    _history(fresh, hist)
    for a, b in zip(orch.penalizers.values(), fresh.penalizers.values()):
        for name in ("cumulated_frequency_penalties", "cumulated_presence_penalties",
                     "cumulated_repetition_penalties", "len_output_tokens"):
            if hasattr(b, name):
                assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_a_draft_step_row_is_its_window_row():
    """Draft step i (one row, after d_1 … d_i) equals row i of the verify window."""
    hist, drafts, logits = _case(3, 6)
    drafts = drafts[:, :5]
    orch = _Orch(PARAMS, ORDERS[0])
    _history(orch, hist)
    window = logits.clone()
    penalties.apply_window(orch, window, drafts)
    for i in range(6):
        row = logits[:, i:i + 1].clone()
        penalties.apply_window(orch, row, drafts[:, :i], row0=i)
        torch.testing.assert_close(row[:, 0], window[:, i], rtol=0, atol=0)


@pytest.mark.parametrize("order", range(len(ORDERS)))
def test_cumulate_accepted_then_the_schedulers_last_token_equals_every_token_fed(order):
    hist, drafts, _ = _case(5, 6)
    drafts = drafts[:, :5]
    tokens = torch.cat([drafts, torch.randint(0, 12, (len(PARAMS), 1))], dim=1)  # [B, 6]: accepted + bonus
    accept = torch.tensor([1, 3, 6, 2])
    orch = _Orch(PARAMS, ORDERS[order])
    _history(orch, hist)
    penalties.cumulate_accepted(orch, tokens, accept)
    orch.feed(tokens.gather(1, (accept - 1).view(-1, 1)).view(-1))  # the scheduler: output_ids[-1]
    for b in range(len(PARAMS)):  # the reference, one request at a time: every accepted token fed in order
        ref = _Orch(PARAMS, ORDERS[order])
        _history(ref, hist)
        for t in range(int(accept[b])):
            ref.feed(tokens[:, t])  # rows other than b are not compared
        for a, r in zip(orch.penalizers.values(), ref.penalizers.values()):
            for name in ("cumulated_frequency_penalties", "cumulated_presence_penalties",
                         "cumulated_repetition_penalties", "len_output_tokens"):
                if hasattr(r, name):
                    torch.testing.assert_close(getattr(a, name)[b], getattr(r, name)[b], rtol=0, atol=0,
                                               msg=f"request {b}: {name}")


def test_orchestrator_only_when_exact_and_required():
    orch = _Orch(PARAMS, ORDERS[0])
    snap = types.SimpleNamespace(penalizer_orchestrator=None)
    live = types.SimpleNamespace(penalizer_orchestrator=orch)
    assert penalties.stash_orchestrator(snap, live) is snap and getattr(snap, penalties.STASH) is orch
    assert penalties.orchestrator_of(snap, exact=True) is orch
    assert penalties.orchestrator_of(snap, exact=False) is None  # overlap scheduler: SGLang's relaxed form
    orch.is_required = False
    assert penalties.orchestrator_of(snap, exact=True) is None
    plain = types.SimpleNamespace(penalizer_orchestrator=None)
    assert penalties.stash_orchestrator(plain, types.SimpleNamespace(penalizer_orchestrator=None)) is plain
    assert not hasattr(plain, penalties.STASH)
