"""sgl_spec.speculative.auto_off: the per-batch switch between a speculation round and a plain INT8 step.

Worker level (the fake target of test_worker.py, whose toy LM reads its context through the KV slots): plain steps of
both kinds, and a policy that switches kinds from step to step, emit exactly the autoregressive target's tokens
(greedy), the target's distribution (sampling), one token per request with accept length 1, and logprobs of the
emitted token. Decision level: the prior's verdicts, probes, α tracking, the online step-time corrections (a fake
clock plays a server whose real step times differ from the prior), hysteresis, and the worker's construction."""
from types import SimpleNamespace

import pytest
import torch

from sglang.srt.model_executor.forward_batch_info import ForwardMode

from sgl_spec.speculative import auto_off as autooff
from sgl_spec.speculative import cost_model as cm
from sgl_spec.speculative.auto_off import DECODE, SPEC, VERIFY, AutoOff
from test_costmodel import LLAMA8B, PYCODE, _hand_model
from toy_worker import (MAX_CTX, PROMPTS, FakeTargetWorker, ToyLM, _exact_marginals, make_sampling_info,
                        make_worker, reference_greedy, run_scheduler)


class Scripted:
    """A policy that plays a fixed sequence of step kinds (the worker's side of the switch, isolated)."""

    def __init__(self, kinds):
        self.kinds, self.i, self.accepted = list(kinds), 0, []

    def decide(self, b, kv_tokens):
        k = self.kinds[self.i % len(self.kinds)]
        self.i += 1
        return k

    def note_other(self):
        pass

    def on_accept(self, n):
        self.accepted.append(n)


def _worker(gamma, lm, policy, slots=4096):
    target = FakeTargetWorker(lm, num_slots=slots)
    worker = make_worker(gamma, target)
    worker._auto = policy
    return worker, target


@pytest.mark.parametrize("kind,graph_bs", [(VERIFY, 64), (DECODE, 0)])
def test_plain_steps_equal_the_autoregressive_target(kind, graph_bs):
    gamma = 3
    lm = ToyLM(V=16, noise=2.0)
    worker, target = _worker(gamma, lm, AutoOff(None, gamma, mode="never", graph_max_bs=graph_bs))
    outs, results = run_scheduler(worker, target, PROMPTS, n_steps=7, sampling_info=make_sampling_info(len(PROMPTS)))
    for prompt, out in zip(PROMPTS, outs):
        assert out == reference_greedy(lm, prompt, len(out)) and len(out) == 8
    w = gamma + 1 if kind == VERIFY else 1
    for r in results:
        assert (r.accept_lens == 1).all() and r.speculative_num_draft_tokens == w
        assert r.next_token_ids.shape == (len(PROMPTS) * w,)
        assert not r.slot_verified.any()  # no verify chose pages: the next round drafts recent ones
    mode = ForwardMode.TARGET_VERIFY if kind == VERIFY else ForwardMode.DECODE
    assert [(m, d) for m, d, _ in target.log[1:]] == [(mode, False)] * 7  # one non-draft forward per step
    assert target.model_runner.attn_backend.entries == 0  # never entered draft mode


def test_switching_between_rounds_and_plain_steps_is_lossless():
    gamma = 4
    lm = ToyLM(V=16, noise=2.0, seed=1)
    policy = Scripted([SPEC, VERIFY, SPEC, SPEC, DECODE, DECODE, SPEC, VERIFY, SPEC])
    worker, target = _worker(gamma, lm, policy)
    outs, results = run_scheduler(worker, target, PROMPTS, n_steps=9, sampling_info=make_sampling_info(len(PROMPTS)))
    for prompt, out in zip(PROMPTS, outs):
        assert out == reference_greedy(lm, prompt, len(out))
    for kind, r in zip(policy.kinds, results):
        assert r.slot_verified.all() == (kind == SPEC)
        if kind != SPEC:
            assert (r.accept_lens == 1).all()
    assert any((r.accept_lens > 1).any() for r in results)


def test_on_verify_complete_cpu_reaches_the_policy():
    policy = Scripted([SPEC])
    worker, _ = _worker(2, ToyLM(V=8, noise=0.0), policy)
    worker.on_verify_complete_cpu([1, 2, 0], batch_size=3)
    assert policy.accepted == [[1, 2, 0]]


@pytest.mark.parametrize("graph_bs", [20000, 0])
def test_plain_step_sampling_matches_the_target_distribution(graph_bs):
    """20000 identical sampled requests, plain steps only: each of the first 3 tokens follows the exact target
    marginal (TV < 0.02; noise ~0.007) - the zero-draft path of verify_chain is a draw from p."""
    V, bs, n = 8, 20000, 3
    lm = ToyLM(V=V, noise=1.5, seed=3)
    worker, target = _worker(3, lm, AutoOff(None, 3, mode="never", graph_max_bs=graph_bs), slots=(bs + 2) * MAX_CTX)
    torch.manual_seed(12)
    prompt = [1, 4, 2]
    outs, _ = run_scheduler(worker, target, [prompt] * bs, n_steps=n - 1,
                            sampling_info=make_sampling_info(bs, temperature=0.9, top_k=6))
    emitted = torch.tensor([o[:n] for o in outs])
    exact = _exact_marginals(lm, prompt, (torch.tensor([0.9]), torch.tensor([6])), n)
    for t in range(n):
        emp = torch.bincount(emitted[:, t], minlength=V).double() / bs
        assert 0.5 * (emp - exact[t]).abs().sum() < 0.02, t


@pytest.mark.parametrize("graph_bs", [64, 0])
def test_plain_step_logprobs_and_greedy_rows_in_a_sampled_batch(graph_bs):
    gamma, bs = 3, len(PROMPTS)
    lm = ToyLM(V=16, noise=2.0)
    worker, target = _worker(gamma, lm, AutoOff(None, gamma, mode="never", graph_max_bs=graph_bs))
    si = make_sampling_info(bs, temperature=1.0)
    si.top_ks[2] = 1  # a greedy request among sampled ones
    si.need_top_k_sampling = True
    outs, results = run_scheduler(worker, target, PROMPTS, n_steps=3, sampling_info=si, return_logprob=True)
    assert outs[2] == reference_greedy(lm, PROMPTS[2], len(outs[2]))
    w = gamma + 1 if graph_bs else 1
    for r in results:
        lp = r.logits_output.next_token_logprobs
        assert lp.shape == (bs, w)
        logits = r.logits_output.next_token_logits.view(bs, w, -1)[:, 0]
        emitted = r.next_token_ids.view(bs, w)[:, 0]
        ref = torch.log_softmax(logits, -1).gather(-1, emitted.view(-1, 1)).squeeze(-1)
        torch.testing.assert_close(lp[:, 0], ref)


# ---- decisions -------------------------------------------------------------------------------------------------------
def _default(cfg, **kw):
    return AutoOff(cm.default_cost_model(cm.ModelShape.from_hf_config(cfg), "NVIDIA H200"), 4, **kw)


def test_prior_verdicts_probes_and_plain_kind():
    # the prior's own verdicts: no exploration phase, no warmup steps
    small = _default(PYCODE, graph_max_bs=64, probe_every=5, probe_len=2, alpha0=0.9, explore=0, warmup_skip=0)
    got = [small.decide(1, 2048, now=0.0) for _ in range(12)]  # a stopped clock: no step-time measurements
    # launch-bound tiny model: plain steps (in the verify graph), and a 2-round probe every 5 plain decisions
    assert got == [VERIFY] * 4 + [SPEC, SPEC] + [VERIFY] * 4 + [SPEC, SPEC]
    assert small.plain_kind(64, 64 * 2048) == VERIFY and small.plain_kind(65, 65 * 2048) == DECODE
    big = _default(LLAMA8B, graph_max_bs=128, probe_every=4, alpha0=0.8, explore=0, warmup_skip=0)
    got = [big.decide(8, 8 * 65536, now=0.0) for _ in range(8)]
    plain = big.plain_kind(8, 8 * 65536)
    assert got == [SPEC] * 3 + [plain] + [SPEC] * 3 + [plain]  # KV-bound 8B at 64k: speculate, probe plain
    # 8B at batch 128: γ padding rows cost more compute than an eager one-token forward's launches
    assert big.plain_kind(128, 128 * 4096) == DECODE and big.plain_kind(1, 4096) == VERIFY


def test_alpha_tracks_fresh_rounds_only_and_turns_speculation_off():
    pol = _default(LLAMA8B, graph_max_bs=8, alpha0=0.8, probe_every=10 ** 9, explore=0)
    assert pol.decide(8, 8 * 65536, now=0.0) == SPEC
    pol.on_accept([0] * 8)  # first round after a non-round: its pages were not chosen by a verify
    assert pol.alpha == 0.8
    for n in range(300):
        if pol.decide(8, 8 * 65536, now=0.0) != SPEC:
            break
        pol.on_accept([0] * 8)  # drafts never accepted: α falls until speculation stops paying
    assert 0 < n < 300 and not pol.on and pol.speedup(8, 8 * 65536) < 1.05
    a = pol.alpha
    pol.on_accept([4] * 8)  # the last step was plain: ignored
    assert pol.alpha == a
    pol.on = True
    pol.note_other()  # a prefill: a new request drafts its first round without verified pages
    pol._probe_left = 1
    assert pol.decide(8, 8 * 65536, now=0.0) == SPEC
    pol.on_accept([0] * 8)  # not fresh: ignored
    assert pol.alpha == a


def test_exploration_speculates_first_and_learns_alpha_fast():
    """The prior says plain for pycode-30m at batch 1, but the first warmup_skip + explore steps speculate (their
    times are measured), and α moves from the prior to what those rounds accept within a few rounds."""
    pol = _default(PYCODE, graph_max_bs=64, alpha0=0.6, warmup_skip=2, explore=4, probe_every=10 ** 9)
    assert pol.speedup(1, 4096) < 1.0
    t, kinds = 0.0, []
    for _ in range(6):
        kinds.append(pol.decide(1, 4096, now=t))
        t += 1e-3
        pol.on_accept([4])  # every draft accepted (γ = 4): α = 1 for fresh rounds
    assert kinds == [SPEC] * 6
    assert pol.alpha == pytest.approx((2 * 0.6 + 5) / 7)  # 5 fresh rounds (the first was not), prior weight 2
    assert pol.correction(SPEC, 1, 4096) != 1.0  # rounds 3-6 were measured
    plain = pol.plain_kind(1, 4096)
    kinds = []
    for _ in range(4):  # then warmup_skip + explore // 2 plain steps, to measure the other kind too
        kinds.append(pol.decide(1, 4096, now=t))
        t += 1e-3
    assert SPEC not in kinds and kinds[0] == plain
    assert pol.correction(VERIFY, 1, 4096) != 1.0 or pol.correction(DECODE, 1, 4096) != 1.0


def _simulate(pol, b, kv, true_factor, steps=600):
    """Run ``steps`` decisions on a fake clock where a step of kind k takes ``predict(k) * true_factor[k]``."""
    t, kinds = 0.0, []
    for _ in range(steps):
        k = pol.decide(b, kv, now=t)
        kinds.append(k)
        t += pol.predict(k, b, kv) * true_factor[k]
        if k == SPEC:
            pol.on_accept([2] * b)  # τ = 3
    return kinds


def test_measured_step_times_override_a_wrong_prior():
    b, kv = 8, 8 * 65536
    # The prior favours speculation here; the server measures rounds 6x slower than predicted: switch off.
    pol = _default(LLAMA8B, graph_max_bs=8, alpha0=0.8, probe_every=32)
    assert pol.speedup(b, kv) > 1.2
    kinds = _simulate(pol, b, kv, {SPEC: 6.0, VERIFY: 1.0, DECODE: 1.0})
    tail = kinds[100:]
    assert tail.count(SPEC) / len(tail) < 0.1 and pol.correction(SPEC, b, kv) == pytest.approx(6.0)
    # The prior says plain here; plain steps are really 5x slower than predicted: speculation wins after a probe.
    pol = _default(PYCODE, graph_max_bs=64, alpha0=0.8, probe_every=16)
    assert pol.speedup(1, 4096) < 1.0
    kinds = _simulate(pol, 1, 4096, {SPEC: 1.0, VERIFY: 5.0, DECODE: 5.0})
    tail = kinds[100:]
    assert tail.count(SPEC) / len(tail) > 0.9 and pol.speedup(1, 4096) > 1.05


def test_measurements_skip_warmup_and_outliers_and_other_forwards():
    pol = _default(LLAMA8B, graph_max_bs=8, probe_every=10 ** 9, warmup_skip=2, alpha0=1.0, explore=0)
    b, kv = 8, 8 * 65536
    p = pol.predict(SPEC, b, kv)
    t, kinds = 0.0, []
    for dt in (1000 * p, 1000 * p, 1.5 * p, 1.5 * p, 1.5 * p, 1000 * p):  # compilations first, one stall later
        kinds.append(pol.decide(b, kv, now=t))
        t += dt
    kinds.append(pol.decide(b, kv, now=t))
    assert set(kinds) == {SPEC}
    assert pol.correction(SPEC, b, kv) == pytest.approx(1.5)  # median of (1.5, 1.5, 1.5, 16 clipped)
    pol.note_other()  # a prefill ran in between: that interval is not a decode step
    pol.decide(b, kv, now=t + 1e6)
    pol.decide(b, kv, now=t + 2e6)  # nor is the next step, which queued behind the prefill's GPU work
    assert pol.correction(SPEC, b, kv) == pytest.approx(1.5)
    pol.decide(b, kv, now=t + 2e6 + 1.5 * p)  # the one after is measured again
    assert len(pol._ratios[SPEC]) == 5
    # another bucket without measurements of its own falls back to the kind's median
    assert pol.correction(SPEC, 128, 128 * 4096) == pytest.approx(1.5)


def test_hysteresis_and_fixed_modes():
    m = _hand_model()
    b, kv = 64, 64 * 15360
    pol = AutoOff(m, 3, graph_max_bs=128, margin=0.05, hysteresis=0.03, probe_every=10 ** 9, explore=0, warmup_skip=0)
    for x in range(1000):  # the smallest α (in steps of 0.001) with a predicted speedup of 1.06
        pol.alpha = x / 1000
        if pol.speedup(b, kv) >= 1.06:
            break
    assert pol.speedup(b, kv) < 1.07
    assert pol.decide(b, kv, now=0.0) == SPEC  # on: 1.06 >= 1 + margin
    pol.on = False
    assert pol.decide(b, kv, now=0.0) != SPEC  # off: needs 1 + margin + hysteresis = 1.08 to come back
    always = AutoOff(None, 3, mode="always", graph_max_bs=4)
    never = AutoOff(None, 3, mode="never", graph_max_bs=4)
    assert {always.decide(x, 10 ** 6, now=x) for x in (1, 8)} == {SPEC}
    assert [never.decide(x, 10 ** 6, now=x) for x in (1, 8)] == [VERIFY, DECODE]  # no model: VERIFY in graphs
    with pytest.raises(ValueError):
        AutoOff(None, 3, mode="auto")


def test_for_worker_reads_the_quantspec_config(tmp_path):
    from sgl_spec.config import QuantSpecConfig

    def cfg(**kw):
        return QuantSpecConfig(speculative=True, page_size=64, num_draft_steps=3, topk_ratio=0.1, min_pages=4,
                               sink_pages=1, dense_draft=False, **kw)

    runner = SimpleNamespace(model_config=SimpleNamespace(hf_text_config=dict(PYCODE)))
    args = SimpleNamespace(device="cpu", disable_cuda_graph=False, cuda_graph_max_bs=32,
                           _quantspec=cfg(speculate="auto"))
    pol = autooff.for_worker(args, runner, 3)
    assert pol.mode == "auto" and pol.graph_max_bs == 0 and pol.model.source == "default:unknown"
    assert pol.model.draft == cm.DraftConfig(False, 0.1, 4, 1)
    assert autooff.for_worker(args, runner, 3, int4_weights=True).model.draft.weight_bits == 4
    _hand_model().save(tmp_path / "fit.json")
    fit = cfg(speculate="auto", cost_model=str(tmp_path / "fit.json"))
    pol = autooff.for_worker(SimpleNamespace(**{**vars(args), "_quantspec": fit}),
                             runner, 3)
    assert {k: pol.model.steps[k] for k in _hand_model().steps} == _hand_model().steps
    assert "ar_int8_eager" in pol.model.steps and pol.model.draft.topk_ratio == 0.1
    pol = autooff.for_worker(SimpleNamespace(**{**vars(args), "_quantspec": cfg(speculate="never")}), runner, 3)
    assert pol.mode == "never" and pol.model is None
    assert autooff.for_worker(SimpleNamespace(device="cuda", cuda_graph_max_bs=16), runner, 3).mode == "always"
    assert autooff.for_worker(SimpleNamespace(device="cuda", cuda_graph_max_bs=16), runner, 3).graph_max_bs == 16


def test_decode_graph_max_bs_reads_sglang_0_5_17_config():
    from types import SimpleNamespace as NS

    from sgl_spec.speculative.auto_off import decode_graph_max_bs

    new = NS(cuda_graph_config=NS(decode=NS(backend="full", max_bs=128)), cuda_graph_max_bs_decode=128)
    assert decode_graph_max_bs(new) == 128
    assert decode_graph_max_bs(NS(cuda_graph_config=NS(decode=NS(backend="disabled", max_bs=128)))) == 0
    assert decode_graph_max_bs(NS(**vars(new), disable_decode_cuda_graph=True)) == 0
    assert decode_graph_max_bs(NS(**vars(new), disable_cuda_graph=True)) == 0
    assert decode_graph_max_bs(NS(cuda_graph_max_bs=64)) == 64  # older releases
    assert decode_graph_max_bs(NS()) == 0
