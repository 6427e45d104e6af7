"""QuantSpecWorker against a fake target worker (the harness: toy_worker.py): a toy LM that reads its context *through
the KV slots* the worker assigns (req_to_token), so wrong positions/slots, a wrong window layout or a wrong stride
change the output. The scheduler loop is emulated the way SGLang's non-overlap spec-v2 path drives a worker
(snapshot/restore of the batch, seq_lens <- new_seq_lens, spec_info <- next_draft_input, tokens sliced with stride
num_draft_tokens), and the way its overlap path does in test_overlap.py."""
from types import SimpleNamespace

import pytest
import torch

from sglang.srt.model_executor.forward_batch_info import ForwardMode

from sgl_spec.pages.policies import TopkPages
from sgl_spec.pages.view import PageScores
from sgl_spec.speculative.spec_info import QuantSpecDraftInput, QuantSpecDraftStep
from sgl_spec.speculative.worker import QuantSpecWorker
from toy_worker import (MAX_CTX, PROMPTS, FakeTargetWorker, ToyLM, _exact_marginals, make_sampling_info, make_worker,
                        reference_greedy, run_scheduler)


@pytest.mark.parametrize("gamma", [1, 3, 5])
@pytest.mark.parametrize("noise", [0.0, 2.0])
def test_greedy_output_equals_autoregressive_target(gamma, noise):
    lm = ToyLM(V=16, noise=noise)
    target = FakeTargetWorker(lm, num_slots=4096)
    worker = make_worker(gamma, target)
    outs, results = run_scheduler(worker, target, PROMPTS, n_steps=8, sampling_info=make_sampling_info(len(PROMPTS)))
    for prompt, out in zip(PROMPTS, outs):
        assert out == reference_greedy(lm, prompt, len(out))
    lens = torch.stack([r.accept_lens for r in results])
    assert ((lens >= 1) & (lens <= gamma + 1)).all()
    if noise == 0.0:  # draft view == target view: every draft is accepted
        assert (lens == gamma + 1).all()
    else:
        assert (lens < gamma + 1).any()
    for r in results:
        assert r.next_token_ids.shape == (len(PROMPTS) * (gamma + 1),) and r.speculative_num_draft_tokens == gamma + 1


def test_each_decode_step_is_gamma_draft_forwards_then_one_verify():
    gamma = 3
    target = FakeTargetWorker(ToyLM(V=16, noise=1.0), num_slots=4096)
    worker = make_worker(gamma, target)
    run_scheduler(worker, target, PROMPTS, n_steps=4, sampling_info=make_sampling_info(len(PROMPTS)))
    modes = [(m, d) for m, d, _ in target.log]
    assert modes[0] == (ForwardMode.EXTEND, False)
    step = [(ForwardMode.DECODE, True)] * gamma + [(ForwardMode.TARGET_VERIFY, False)]
    assert modes[1:] == step * 4
    assert target.model_runner.attn_backend.entries == 4  # one draft-mode scope per step


def test_sampling_with_identical_views_accepts_every_draft():
    """p and q come from bitwise-equal logits; they are equal only if the draft side applies the same temperature /
    top-k / bias transforms as the verify side, and then rejection sampling must accept everything."""
    gamma, bs, V = 4, 6, 16
    target = FakeTargetWorker(ToyLM(V=V, noise=0.0), num_slots=4096)
    worker = make_worker(gamma, target)
    bias = torch.zeros(bs, V)
    bias[:, 5] = 1.0
    si = make_sampling_info(bs, temperature=0.7, top_k=5, logit_bias=bias)
    prompts = [[1, 2, 3]] * bs
    _, results = run_scheduler(worker, target, prompts, n_steps=5, sampling_info=si)
    assert all((r.accept_lens == gamma + 1).all() for r in results)


def test_mixed_batch_greedy_rows_stay_exact():
    gamma, V = 3, 16
    lm = ToyLM(V=V, noise=2.0)
    target = FakeTargetWorker(lm, num_slots=4096)
    worker = make_worker(gamma, target)
    si = make_sampling_info(len(PROMPTS), temperature=1.0)
    si.top_ks[1] = 1  # request 1 is greedy (SGLang's encoding of temperature 0)
    si.need_top_k_sampling = True
    outs, _ = run_scheduler(worker, target, PROMPTS, n_steps=6, sampling_info=si)
    assert outs[1] == reference_greedy(lm, PROMPTS[1], len(outs[1]))


def test_logit_bias_reaches_draft_and_verify():
    gamma, bs, V = 3, 2, 16
    lm = ToyLM(V=V, noise=2.0)
    target = FakeTargetWorker(lm, num_slots=4096)
    worker = make_worker(gamma, target)
    bias = torch.zeros(bs, V)
    bias[:, 11] = 1000.0
    si = make_sampling_info(bs, logit_bias=bias)
    outs, results = run_scheduler(worker, target, [[1, 2], [3]], n_steps=3, sampling_info=si)
    assert all(t == 11 for out in outs for t in out)
    assert all((r.accept_lens == gamma + 1).all() for r in results)  # biased drafts agree with biased target


def test_sampling_distribution_matches_target_end_to_end():
    """20000 identical requests in one batch, V=8, gamma=3, imperfect draft: the empirical distribution of each of
    the first 4 emitted tokens matches the exact target marginal (TV < 0.02; statistical noise is ~0.007)."""
    gamma, V, bs, n = 3, 8, 20000, 4
    lm = ToyLM(V=V, noise=1.5, seed=3)
    target = FakeTargetWorker(lm, num_slots=(bs + 2) * MAX_CTX)
    worker = make_worker(gamma, target)
    si = make_sampling_info(bs, temperature=0.9, top_k=6)
    prompt = [1, 4, 2]
    torch.manual_seed(11)
    outs, results = run_scheduler(worker, target, [prompt] * bs, n_steps=3, sampling_info=si)
    assert min(len(o) for o in outs) >= n
    emitted = torch.tensor([o[:n] for o in outs])
    exact = _exact_marginals(lm, prompt, (torch.tensor([0.9]), torch.tensor([6])), n)
    for t in range(n):
        emp = torch.bincount(emitted[:, t], minlength=V).double() / bs
        assert 0.5 * (emp - exact[t]).abs().sum() < 0.02, t
    mean_acc = torch.stack([r.accept_lens.float() for r in results]).mean()
    assert 1.0 < mean_acc < gamma + 1  # both acceptances and rejections were exercised


def test_logprobs_of_accepted_tokens():
    gamma = 3
    lm = ToyLM(V=16, noise=2.0)
    target = FakeTargetWorker(lm, num_slots=4096)
    worker = make_worker(gamma, target)
    _, results = run_scheduler(
        worker, target, PROMPTS, n_steps=2, sampling_info=make_sampling_info(len(PROMPTS)), return_logprob=True
    )
    for r in results:
        lp = r.logits_output.next_token_logprobs
        assert lp.shape == (len(PROMPTS), gamma + 1)
        logits = r.logits_output.next_token_logits.view(len(PROMPTS), gamma + 1, -1)
        ref = torch.log_softmax(logits, -1).gather(-1, r.next_token_ids.view(len(PROMPTS), -1, 1)).squeeze(-1)
        for b, n in enumerate(r.accept_lens.tolist()):
            torch.testing.assert_close(lp[b, :n], ref[b, :n])


def test_draft_input_filter_and_merge():
    a = QuantSpecDraftInput(torch.tensor([10, 11, 12]), 4)
    a.filter_batch(torch.tensor([2, 0]))
    a.merge_batch(QuantSpecDraftInput(torch.tensor([13]), 4))
    assert a.bonus_tokens.tolist() == [12, 10, 13]
    # overlap scheduling: only the future indices (request slots) are filtered and merged; the tokens are gathered
    # from SGLang's FutureMap before the next forward
    b, c = QuantSpecDraftInput(torch.tensor([10, 11, 12]), 4), QuantSpecDraftInput(torch.tensor([13]), 4)
    b.future_indices, c.future_indices = torch.tensor([5, 2, 7]), torch.tensor([3])
    b.filter_batch(torch.tensor([2, 0]))
    b.merge_batch(c)
    assert b.future_indices.tolist() == [7, 5, 3] and b.bonus_tokens is None


def test_constructor_rejects_inconsistent_server_args():
    target = FakeTargetWorker(ToyLM(V=8, noise=0.0), num_slots=16)
    base = dict(device="cpu", speculative_num_steps=3, speculative_num_draft_tokens=4, speculative_eagle_topk=1,
                disable_overlap_schedule=True)
    for bad in (dict(speculative_num_draft_tokens=3), dict(speculative_eagle_topk=2), dict(speculative_num_steps=0)):
        with pytest.raises(ValueError):
            QuantSpecWorker(SimpleNamespace(**{**base, **bad}), gpu_id=0, nccl_port=0, target_worker=target)


# ---- sparse draft pages -------------------------------------------------------------------------------------------
class PagesBackend:
    """A backend's page scores [L, slots, Hkv, MAXP] (by batch row) and page table, and its ``PageScores`` view."""

    def __init__(self, L=2, slots=5, H=2, maxp=16, P=4, ratio=0.5, min_pages=2, sink_pages=1):
        self.cfg = SimpleNamespace(page_size=P, topk_ratio=ratio, min_pages=min_pages, sink_pages=sink_pages)
        self.page_scores = torch.full((L, slots, H, maxp), 1e9)  # unscored entries must never be picked
        g = torch.Generator().manual_seed(5)
        self.table = torch.stack([torch.randperm(1000, generator=g)[:maxp] for _ in range(slots)]).int()

    def page_table(self, rpi):
        return self.table[rpi.long()]

    def scores_view(self):
        return PageScores.of(self.cfg, self.page_scores, self.page_table)


def test_draft_pages_follow_verify_scores_per_slot():
    be = PagesBackend()
    pages = TopkPages(be.scores_view())
    assert pages.kcap == 8  # max(min_pages 2, sinks 1, ceil(0.5 * 16))
    g = torch.Generator().manual_seed(6)
    rpi = torch.tensor([3, 1])
    window_start = torch.tensor([22, 13])  # verified pages: < 5 and < 3
    new_seq_lens = torch.tensor([25, 15])  # request 0's window completed page 5; request 1's completed none
    for b, nj in enumerate((5, 3)):
        be.page_scores[:, b, :, :nj] = torch.randn(2, 2, nj, generator=g)
    scored = be.page_scores[:, :2].clone()
    pages.after_verify(rpi, window_start, new_seq_lens)

    def expected(l, b, n_next, forced):
        k = min(n_next, max(2, -(-n_next // 2)))  # ratio 0.5, min 2
        total = scored[l, b].sum(0)
        cands = [j for j in range(1, n_next) if j != forced]
        best = sorted(cands, key=lambda j: -total[j].item())[: k - 1 - (forced is not None)]
        chosen = sorted([0] + best + ([forced] if forced is not None else []))
        return be.table[rpi[b], chosen].tolist()

    # The next round sees the batch reordered: the selection must follow the slot, not the row.
    ids, count = pages.for_round(torch.tensor([1, 3]), torch.tensor([15, 25]), torch.tensor([True, True]))
    for l in range(2):
        for row, (b, n_next, forced) in enumerate(((1, 3, None), (0, 6, 5))):
            k = count[l, row].item()
            assert ids[l, row, :k].tolist() == expected(l, b, n_next, forced)
            assert (ids[l, row, k:] == 0).all()


def test_draft_pages_before_first_verify_use_sinks_and_recent_pages():
    be = PagesBackend()
    pages = TopkPages(be.scores_view())
    ids, count = pages.for_round(torch.tensor([2, 4]), torch.tensor([22, 3]), torch.tensor([False, False]))
    # request in slot 2: 5 complete pages, k = max(2, ceil(2.5)) = 3 -> sink page 0 and the two newest pages 3, 4
    assert count[:, 0].tolist() == [3, 3] and ids[0, 0, :3].tolist() == be.table[2, [0, 3, 4]].tolist()
    assert count[:, 1].tolist() == [0, 0]  # no complete page yet
    assert torch.equal(ids[0], ids[1])


def test_draft_steps_are_refused_by_sglangs_decode_cuda_graphs():
    """Under speculation SGLang captures its decode graphs for TARGET_VERIFY at width γ+1 and replays them for any
    DECODE batch whose spec_info does not declare another width; the draft step's spec_info (width 1) must make
    can_run_graph() say no (pins the SGLang 0.5.17 rule the worker relies on)."""
    from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner


    runner = SimpleNamespace(ragged_verify_mode=False, captured_req_width=4)
    fb = SimpleNamespace(replace_embeds=None, spec_info=QuantSpecDraftStep(), forward_mode=ForwardMode.DECODE)
    assert DecodeCudaGraphRunner.can_run_graph(runner, fb) is False
