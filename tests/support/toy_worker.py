"""The toy harness of the QuantSpecWorker tests (test_worker.py, test_overlap.py, test_autooff.py): a toy LM that reads
its context *through the KV slots* the worker assigns (req_to_token), so wrong positions/slots, a wrong window layout
or a wrong stride change the output; a fake target worker around it; the scheduler loop emulated the way SGLang's
non-overlap spec-v2 path drives a worker (snapshot/restore of the batch, seq_lens <- new_seq_lens, spec_info <-
next_draft_input, tokens sliced with stride num_draft_tokens); and the references the tests compare with."""
import contextlib
import dataclasses
from types import SimpleNamespace

import torch

from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.model_executor.forward_batch_info import ForwardMode

from sgl_spec.speculative import sampling
from sgl_spec.speculative.spec_info import QuantSpecVerifyInput
from sgl_spec.speculative.worker import QuantSpecWorker

TOP_K_ALL = 1 << 30
MAX_CTX = 96


class ToyLM:
    """logits(p) = W1[tok[p]] + W2[tok[p-1]] + Pos[p] (+ noise * D[tok[p]] in draft mode)."""

    def __init__(self, V, noise, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.V, self.noise = V, noise
        self.W1 = torch.randn(V, V, generator=g) * 2
        self.W2 = torch.randn(V, V, generator=g)
        self.Pos = torch.randn(MAX_CTX, V, generator=g) * 0.5
        self.D = torch.randn(V, V, generator=g)

    def logits(self, cur, prev, pos, draft):
        out = self.W1[cur] + self.W2[prev] + self.Pos[pos]
        return out + self.noise * self.D[cur] if draft else out


class FakeBackend:
    def __init__(self):
        self.in_draft = False
        self.entries = 0
        self.window_start = None

    @contextlib.contextmanager
    def draft_mode(self, window_start, page_ids=None, num_pages=None):
        assert not self.in_draft and page_ids is None and num_pages is None  # no page_scores: dense drafts
        self.in_draft, self.entries = True, self.entries + 1
        self.window_start = window_start
        try:
            yield
        finally:
            self.in_draft = False


class FakeTargetWorker:
    def __init__(self, lm, num_slots, sampling_info_fn=None):
        self.lm = lm
        self.kv = torch.full((num_slots,), -1, dtype=torch.int64)  # token stored in each KV slot
        self.model_runner = SimpleNamespace(attn_backend=FakeBackend())
        self.log = []  # (forward mode, draft flag, batch size)

    def _tok(self, batch, req_pool_idx, pos):
        slots = batch.req_to_token_pool.req_to_token[req_pool_idx, pos.clamp(min=0)].long()
        tok = self.kv[slots]
        assert (tok >= 0).all(), "read a KV slot that was never written"
        return torch.where(pos >= 0, tok, torch.zeros_like(tok))

    def forward_batch_generation(self, batch, is_verify=False, capture_hidden_mode=None):
        draft = self.model_runner.attn_backend.in_draft
        mode = batch.forward_mode
        self.log.append((mode, draft, len(batch.reqs)))
        assert batch.input_ids.shape == batch.out_cache_loc.shape
        self.kv[batch.out_cache_loc] = batch.input_ids.long()
        if mode == ForwardMode.DECODE:
            rpi, pos = batch.req_pool_indices, batch.seq_lens - 1
            # A draft step must not be mistaken for the γ+1-wide verify SGLang captures CUDA graphs for.
            assert batch.spec_info.num_tokens_per_req == 1
            # draft_mode's window_start is each request's committed length = position of the first draft step
            assert not draft or torch.all(pos >= self.model_runner.attn_backend.window_start)
        elif mode == ForwardMode.TARGET_VERIFY:
            assert not draft and isinstance(batch.spec_info, QuantSpecVerifyInput)
            n = batch.spec_info.draft_token_num
            rpi = batch.req_pool_indices.repeat_interleave(n)
            pos = batch.spec_info.positions
            # Window starts at the committed length, which seq_lens still holds.
            assert torch.equal(pos.view(-1, n)[:, 0], batch.seq_lens)
        else:  # EXTEND: one row per request (its last prompt token)
            rpi, pos = batch.req_pool_indices, batch.seq_lens - 1
        assert not (draft and mode != ForwardMode.DECODE)
        logits = self.lm.logits(self._tok(batch, rpi, pos), self._tok(batch, rpi, pos - 1), pos, draft)
        out = GenerationBatchResult(
            logits_output=SimpleNamespace(next_token_logits=logits, hidden_states=None, next_token_logprobs=None),
            can_run_cuda_graph=False,
        )
        if not is_verify:
            si = batch.sampling_info
            l2 = sampling.apply_logit_adjustments(logits.clone(), si, 1)
            if si.is_all_greedy:
                out.next_token_ids = l2.argmax(-1)
            else:
                p = sampling.filtered_probs(l2, si.temperatures.view(-1), si.top_ks, si.top_ps, si.min_ps)
                out.next_token_ids = torch.where(si.top_ks <= 1, l2.argmax(-1), torch.multinomial(p, 1).squeeze(1))
        return out


def make_sampling_info(bs, temperature=None, top_k=None, logit_bias=None):
    greedy = temperature is None
    temps = torch.full((bs, 1), 1.0 if greedy else temperature)
    top_ks = torch.full((bs,), 1 if greedy else (top_k or TOP_K_ALL), dtype=torch.int64)
    return SimpleNamespace(
        is_all_greedy=greedy,
        temperatures=temps,
        top_ks=top_ks,
        top_ps=torch.ones(bs),
        min_ps=torch.zeros(bs),
        need_top_k_sampling=bool((top_ks != TOP_K_ALL).any()),
        need_top_p_sampling=False,
        need_min_p_sampling=False,
        acc_additive_penalties=None,
        acc_scaling_penalties=None,
        logit_bias=logit_bias,
        has_custom_logit_processor=False,
    )


@dataclasses.dataclass
class Batch:
    reqs: list
    forward_mode: ForwardMode
    seq_lens: torch.Tensor
    seq_lens_cpu: torch.Tensor
    req_pool_indices: torch.Tensor
    req_to_token_pool: SimpleNamespace
    sampling_info: SimpleNamespace
    input_ids: torch.Tensor = None
    out_cache_loc: torch.Tensor = None
    orig_seq_lens: torch.Tensor = None
    seq_lens_sum: int = None
    spec_info: object = None
    return_logprob: bool = False
    has_grammar: bool = False
    top_logprobs_nums: list = None
    token_ids_logprobs: list = None
    # what SGLang's overlap relay (resolve_forward_inputs, FutureMap) reads from a ScheduleBatch
    prefill_input_ids_cpu: object = None
    mix_running_indices: object = None
    enable_overlap: bool = False
    spec_algorithm: object = None
    req_pool_indices_cpu: object = None


def make_worker(gamma, target):
    args = SimpleNamespace(
        device="cpu",
        speculative_num_steps=gamma,
        speculative_num_draft_tokens=gamma + 1,
        speculative_eagle_topk=1,
        disable_overlap_schedule=True,
    )
    w = QuantSpecWorker(args, gpu_id=0, nccl_port=0, target_worker=target)  # SGLang passes keywords
    w.alloc_memory_pool(req_to_token_pool=None, token_to_kv_pool_allocator=None)
    return w


def run_scheduler(worker, target, prompts, n_steps, sampling_info, seed=0, return_logprob=False):
    """Prefill + n_steps decode steps; returns per-request emitted tokens and the list of step results."""
    g = torch.Generator().manual_seed(seed)
    bs = len(prompts)
    num_slots = target.kv.numel()
    # Scattered slots and pool rows: a worker that confuses rows, positions or slots reads the wrong context.
    req_to_token = torch.randperm(num_slots, generator=g)[: (bs + 2) * MAX_CTX].view(bs + 2, MAX_CTX).int()
    rpi = torch.randperm(bs + 2, generator=g)[:bs]
    lens = torch.tensor([len(p) for p in prompts])
    batch = Batch(
        reqs=[SimpleNamespace(output_ids=[], origin_input_ids=p) for p in prompts],
        forward_mode=ForwardMode.EXTEND,
        seq_lens=lens.clone(),
        seq_lens_cpu=lens.clone(),
        req_pool_indices=rpi,
        req_to_token_pool=SimpleNamespace(req_to_token=req_to_token),
        sampling_info=sampling_info,
        input_ids=torch.tensor([t for p in prompts for t in p]),
        out_cache_loc=torch.cat([req_to_token[r, : len(p)].long() for r, p in zip(rpi.tolist(), prompts)]),
        return_logprob=return_logprob,
        top_logprobs_nums=[0] * bs,
    )
    res = worker.forward_batch_generation(batch)
    outs = [[t] for t in res.next_token_ids.tolist()]
    batch.seq_lens, batch.spec_info = res.new_seq_lens, res.next_draft_input
    results = []
    for _ in range(n_steps):
        batch.forward_mode, batch.input_ids, batch.out_cache_loc = ForwardMode.DECODE, None, None
        snapshot = dataclasses.replace(batch)
        res = worker.forward_batch_generation(batch)
        batch = snapshot  # the scheduler's _forward_isolation restores every field ...
        batch.spec_info = res.next_draft_input  # ... then applies what carries over
        batch.seq_lens = res.new_seq_lens
        batch.seq_lens_cpu = res.new_seq_lens.clone()
        stride, acc, ids = res.speculative_num_draft_tokens, res.accept_lens.tolist(), res.next_token_ids.tolist()
        for i in range(bs):
            outs[i] += ids[i * stride : i * stride + acc[i]]
        res.slot_verified = worker._verified[batch.req_pool_indices].clone()  # for the tests: per-slot page flags
        results.append(res)
    return outs, results


def reference_greedy(lm, prompt, n, bias=None):
    toks = list(prompt)
    for _ in range(n):
        p = len(toks) - 1
        prev = torch.tensor([toks[p - 1] if p > 0 else 0])
        logits = lm.logits(torch.tensor([toks[p]]), prev, torch.tensor([p]), False)
        if bias is not None:
            logits = logits + bias
        toks.append(int(logits.argmax()))
    return toks[len(prompt) :]


PROMPTS = [[3, 1, 4, 1, 5], [9], [2, 6, 5, 3, 5, 8, 9, 7, 9], [7, 7]]


def _exact_marginals(lm, prompt, si_row, n):
    """Exact distribution of the first n sampled tokens (enumerating the Markov state (prev, cur))."""
    V = lm.V
    temps, topk = si_row

    def probs(cur, prev, pos):
        logits = lm.logits(cur, prev, pos, False)
        return sampling.filtered_probs(logits, temps.expand(len(cur)), topk.expand(len(cur))).double()

    # state distribution over (prev, cur) pairs, position of cur = len(prompt) - 1 + t
    state = torch.zeros(V, V, dtype=torch.float64)
    state[prompt[-2] if len(prompt) > 1 else 0, prompt[-1]] = 1.0
    prev_idx, cur_idx = torch.meshgrid(torch.arange(V), torch.arange(V), indexing="ij")
    res = []
    for t in range(n):
        pos = torch.full((V * V,), len(prompt) - 1 + t)
        P = probs(cur_idx.reshape(-1), prev_idx.reshape(-1), pos).view(V, V, V)  # [prev, cur, next]
        joint = state.unsqueeze(-1) * P
        res.append(joint.sum((0, 1)))
        state = joint.sum(0)  # new (prev=cur, cur=next)
    return res
