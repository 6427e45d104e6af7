"""QuantSpec self-speculative worker (SGLang spec-v2 schema; overlap and non-overlap scheduling).

One decode step of a batch whose committed length is ``L`` (``batch.seq_lens``; the last emitted token ``t`` is not
in the KV cache yet):

1. **Draft**: γ DECODE forwards of the target model itself with the attention backend in draft mode (upper plane of
   the top-k pages + full-precision hot tokens). Step ``i`` feeds ``t`` (i = 0) or ``d_i`` at position ``L + i`` into
   KV slot ``req_to_token[r, L + i]`` and proposes ``d_{i+1}`` (argmax, or a draw from q = the filtered draft
   distribution when the request samples).
2. **Verify**: one TARGET_VERIFY forward over ``[t, d_1 … d_γ]`` at positions ``L … L+γ`` with the same slots, so the
   verify K/V (INT8 view) overwrites the draft's K/V.
3. **Accept** (:mod:`sgl_spec.speculative.sampling`): ``n`` drafts + one correction/bonus token; ``new_seq_lens = L + n + 1``.
   Rejected positions need no KV work: slots past the new length are rewritten by the next window before any query
   reads them, and the backend's positional view never reads past a query's own position.

Prefill (EXTEND) is a plain target forward; the backend quantizes completed pages. The scheduler trims windows that
run past ``max_new_tokens`` or a stop token, and counts spec metrics (spec_verify_ct, accept length, histogram) from
``accept_lens``. γ = ``--speculative-num-steps``; ``speculative_num_draft_tokens`` must be γ + 1 and topk 1.

Auto-off (:mod:`sgl_spec.speculative.auto_off`, ``--quantspec-speculate``): where speculation would lose on a batch, the step is
one plain INT8 forward instead (accept length 1, same output).

Overlap scheduling (SGLang's default): the scheduler launches step k+1 before it processes step k's results on the
host. Everything step k+1 needs comes from the device: the committed lengths through ``on_publish`` (the scheduler's
FutureMap), the last tokens through ``next_draft_input.bonus_tokens`` (relayed by the same FutureMap), and whether a
request's sparse draft pages were chosen by a verify from a per-slot flag this worker keeps on the device
(``_verified``), so no step depends on the host having seen the previous one. All forwards run in order on one stream.
"""
from __future__ import annotations

import contextlib
import functools
import logging
from typing import Optional

import torch

from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardMode
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker

from sgl_spec.kernels.argmax_rows import argmax_rows
from sgl_spec.pages import policies as pagetable
from sgl_spec.speculative import (accept, auto_off as autooff, draft_graph, draft_layers, draft_weights, penalties,
                                  phase_timer, sampling, war_release)
from sgl_spec.config import get_config
from sgl_spec.patches import sglang
from sgl_spec.speculative.spec_info import QuantSpecDraftInput, QuantSpecDraftStep, QuantSpecVerifyInput

logger = logging.getLogger(__name__)


class _SelfDraft:
    """What SGLang's generic code expects at ``spec_worker.draft_worker`` (graph/weight accounting, and
    ``draft_worker.draft_runner.token_to_kv_pool`` for disaggregation/HiCache). The target model drafts itself through
    the target's own KV pool, so there is no separate runner, pool, graph or weight to report."""

    draft_runner = type("NoDraftRunner", (), {"token_to_kv_pool": None})()
    draft_runners: list = []
    graph_memory_usage: dict = {}
    graph_time_usage: dict = {}
    weight_load_time = 0.0
    preloaded_weights_bytes = 0

    def init_attention_backends(self):
        pass

    def init_cuda_graphs(self):
        pass


class QuantSpecWorker(BaseSpecWorker):
    def __init__(self, server_args, gpu_id: int, nccl_port: int, target_worker, ps=None):
        super().__init__()
        self.server_args = server_args
        self._target_worker = target_worker
        self.model_runner = target_worker.model_runner
        resolved = functools.partial(sglang().resolved, server_args)
        self.device = resolved("device")
        cfg = get_config(server_args)  # validated by sgl_spec/config.py: 1 <= γ <= P - 1, a chain of γ+1 tokens
        self.gamma = cfg.num_draft_steps if cfg is not None else int(resolved("speculative_num_steps") or 0)
        if self.gamma < 1:
            raise ValueError(f"quantspec needs --speculative-num-steps >= 1, got {self.gamma}")
        ndt = resolved("speculative_num_draft_tokens")
        if ndt is not None and ndt != self.gamma + 1:
            raise ValueError(f"quantspec drafts a chain: speculative_num_draft_tokens must be γ+1={self.gamma + 1}, "
                             f"got {ndt}")
        if (resolved("speculative_eagle_topk") or 1) != 1:
            raise ValueError("quantspec drafts a chain: speculative_eagle_topk must be 1")
        self.speculative_num_steps = self.gamma
        self.speculative_num_draft_tokens = self.gamma + 1
        # exact penalties need the live penalizer state, which only the non-overlap scheduler leaves alone while a
        # round runs (sgl_spec/speculative/penalties.py)
        self._exact_penalties = bool(resolved("disable_overlap_schedule"))
        self.topk = 1
        self.req_to_token_pool = None
        self.token_to_kv_pool_allocator = None
        self._self_draft = _SelfDraft()
        self._pages = None  # the draft page policy (sgl_spec/pages/policies.py), built on the first decode
        self._auto = None  # speculate or take a plain step, per batch (sgl_spec/speculative/auto_off.py), built on the first decode
        self._draft_graphs = None  # sgl_spec/speculative/draft_graph.py, captured in init_cuda_graphs (None: eager drafts)
        self._fused_draft = False  # drafts run sgl_spec/speculative/draft_layers.py's fused layers (set in init_cuda_graphs)
        # drafts read the 4-bit copy of the linear weights (sgl_spec/speculative/draft_weights.py), built while
        # SGLang sizes the KV pool - after this constructor - so it is looked up once the pool exists
        self._int4_draft = None
        self._simulate = accept.simulated_alpha()  # SGL_SPEC_SIMULATE_ACCEPT (benchmarking)
        if self._simulate is not None:
            logger.warning("%s=%s (benchmarking knob): greedy drafts are kept with probability %s - acceptance and "
                           "speed are simulated, the output is still the target's", accept.SIMULATE_ENV,
                           self._simulate, self._simulate)
        self._verified = None  # [req slots] bool (device): a verify chose the slot's draft pages since its prefill
        self._timer = phase_timer.from_env(self.device)  # SGL_SPEC_TIMING (debugging)
        self._profiler = phase_timer.RoundProfiler.from_env()  # SGL_SPEC_PROFILE (debugging)

    def _resolve_int4_draft(self) -> bool:
        if self._int4_draft is None:
            self._int4_draft = draft_weights.has_copy(getattr(self.model_runner, "model", None))
            logger.info("quantspec: draft passes compute with %s", "the 4-bit copy of the linear weights"
                        if self._int4_draft else "the checkpoint's linear weights")
        return self._int4_draft

    # ---- scheduler plumbing ----------------------------------------------------------------------------------------
    @property
    def draft_worker(self):
        return self._self_draft

    def alloc_memory_pool(self, memory_pool_config=None, req_to_token_pool=None, token_to_kv_pool_allocator=None):
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool_allocator = token_to_kv_pool_allocator

    def init_cuda_graphs(self):
        """After the target captured its (verify) graphs: capture the draft graphs into the same memory pool."""
        backend = self.model_runner.attn_backend
        if self._pages is None and hasattr(backend, "draft_mode"):
            self._pages = pagetable.draft_pages(backend)
        cfg = get_config(self.server_args)
        self._resolve_int4_draft()
        self._fused_draft = draft_layers.resolve(self.model_runner.model, bool(cfg and cfg.fused_draft),
                                                 int4_weights=self._int4_draft)
        self._draft_graphs = draft_graph.capture(self.model_runner, self._pages, fused_layers=self._fused_draft)
        if self._draft_graphs is not None:
            self._additional_graph_memory_usage["draft_decode"] = self._draft_graphs.memory_usage_gb

    # Weight updates: the scheduler updates the target worker itself and then calls these on the "draft" worker.
    # Our draft *is* the target, so disk/IPC updates have nothing left to do; tensor updates are routed here
    # instead of to the target (scheduler: `draft_worker or tp_worker`), so forward them.
    def update_weights_from_tensor(self, recv_req):
        return self.target_worker.update_weights_from_tensor(recv_req)

    def update_weights_from_disk(self, recv_req):
        return True, "quantspec drafts with the target model; nothing else to update"

    def update_weights_from_ipc(self, recv_req):
        return True, "quantspec drafts with the target model; nothing else to update"

    # ---- one scheduler step ----------------------------------------------------------------------------------------
    def forward_batch_generation(self, batch, on_publish=None, **_unused) -> GenerationBatchResult:
        if batch.forward_mode.is_decode():
            result = self._decode(batch)
        else:
            result = self._extend(batch)
        if on_publish is not None:  # overlap scheduling: the next step's committed lengths, published on the device
            on_publish(result.new_seq_lens)
        return result

    def _slot_flags(self, batch) -> torch.Tensor:
        if self._verified is None:
            rows = batch.req_to_token_pool.req_to_token.shape[0]
            self._verified = torch.zeros(rows, dtype=torch.bool, device=batch.seq_lens.device)
        return self._verified

    def mark_verified(self, batch, value: bool) -> None:
        """Whether the requests' next round drafts from pages a verify chose (True) or from recent pages (False)."""
        # index_fill_ passes the value as a kernel argument; ``flags[idx] = value`` would copy a host scalar to the
        # device from pageable memory, which blocks the host until the stream drains (it took 45% of the scheduler
        # process's time at batch 64 and serialized the overlap scheduler; py-spy, H200).
        self._slot_flags(batch).index_fill_(0, batch.req_pool_indices.long(), value)

    def _extend(self, batch) -> GenerationBatchResult:
        """Prefill (or idle): the plain target forward samples the first token, which starts the first window."""
        if self._auto is not None:
            self._auto.note_other()
        result = self.target_worker.forward_batch_generation(batch)
        # Spec-v2 convention: seq_lens counts tokens in the KV cache; the sampled token is not in it yet.
        result.new_seq_lens = batch.seq_lens
        result.speculative_num_draft_tokens = self.speculative_num_draft_tokens
        last = result.next_token_ids
        if last is None:
            last = torch.zeros(len(batch.reqs), dtype=torch.int64, device=batch.seq_lens.device)
        if len(batch.reqs):
            self.mark_verified(batch, False)  # a (re)used slot: its first round drafts from recent pages
        result.next_draft_input = QuantSpecDraftInput(last.to(torch.int64), self.speculative_num_draft_tokens)
        return result

    def _carry(self, batch) -> torch.Tensor:
        """The last emitted token of each request [bs] (int64): our draft input's ``bonus_tokens``, which the overlap
        scheduler has just gathered from its FutureMap, or which the non-overlap scheduler filtered/merged."""
        info = batch.spec_info
        tok = getattr(info, "bonus_tokens", None) if isinstance(info, QuantSpecDraftInput) else None
        if tok is not None and tok.shape[0] == len(batch.reqs):
            return tok.to(torch.int64)
        # Only reached if the scheduler built a decode batch without our carry (never on the normal path); the host
        # lists are then complete (this reads them, so it is not overlap-safe, and it logs).
        logger.warning("quantspec: decode batch without a draft input; rebuilding last tokens from requests")
        ids = [r.output_ids[-1] if r.output_ids else r.origin_input_ids[-1] for r in batch.reqs]
        return torch.tensor(ids, dtype=torch.int64, device=batch.seq_lens.device)

    def _draft_scope(self, batch, window_start: torch.Tensor, has_pages: torch.Tensor):
        """The backend's draft mode for this round (docs/CONTRACTS.md "Backend ⇄ worker"): dense, or sparse with
        each request's pages from the draft page policy. A backend without a draft mode (tests, stock backends)
        drafts with its target view: still lossless, only without the speedup."""
        backend = self.model_runner.attn_backend
        if not hasattr(backend, "draft_mode"):
            return contextlib.nullcontext()
        if self._pages is None:
            self._pages = pagetable.draft_pages(backend)
        if getattr(self._pages, "per_request", False):  # --quantspec-draft-pages per-request (acceptance study)
            self._pages.assign(batch.reqs)
        page_ids, num_pages = self._pages.for_round(batch.req_pool_indices, window_start, has_pages)
        return backend.draft_mode(window_start, page_ids, num_pages)

    def _decode(self, batch) -> GenerationBatchResult:
        G, bs = self.gamma, len(batch.reqs)
        seq0, seq0_cpu = batch.seq_lens, batch.seq_lens_cpu
        dev = seq0.device
        last = self._carry(batch)
        step = self._policy().decide(bs, self._kv_tokens(batch))
        if step != autooff.SPEC:  # speculation would lose on this batch: one plain INT8 step (same output)
            return autooff.plain_step(self, batch, last, step)
        has_pages = self._slot_flags(batch)[batch.req_pool_indices]
        timer = self._timer
        if timer is not None:
            timer.start(bs)
        if self._profiler is not None:
            self._profiler.round()
        win_pos, win_loc = self._window(batch, G + 1)  # [bs, G+1] each
        # From here on the scheduler may prepare the next batch while this round runs (sgl_spec/speculative/war_release.py)
        read_done = war_release.record(batch, dev)

        si = batch.sampling_info
        orch = penalties.orchestrator_of(si, self._exact_penalties)  # None: SGLang's relaxed penalties
        params = accept.sampling_params(si)

        # ---- 1. draft: γ single-token forwards through the backend's draft view ----
        drafts = torch.empty((bs, G), dtype=torch.int64, device=dev)
        draft_step = QuantSpecDraftStep()
        draft_probs = None
        tok = last
        return_logprob = batch.return_logprob
        batch.return_logprob = False  # draft logits are internal; logprobs come from the verify rows
        graphs = draft_graph.routed(self._draft_graphs, self.model_runner)  # CUDA graphs, or eager drafts
        # eager draft forwards (no graph for this batch) run the same layers and weights as the captured graphs
        fused = draft_layers.fused(self.model_runner.model) if self._fused_draft else contextlib.nullcontext()
        int4 = draft_weights.int4(self.model_runner.model) if self._resolve_int4_draft() else contextlib.nullcontext()
        with self._draft_scope(batch, seq0, has_pages), graphs, fused, int4:
            if timer is not None:
                timer.mark("pages")
            replayed = None  # the draft graph runner once step 0 replayed one of its graphs
            for i in range(G):
                if replayed is not None:  # steps 1 … γ-1: the same graph, new token and position (host-light)
                    logits = replayed.replay_next(tok, win_pos[:, i])
                else:
                    batch.forward_mode = ForwardMode.DECODE
                    batch.input_ids = tok.contiguous()  # steps >= 1: a column of drafts
                    batch.out_cache_loc = win_loc[:, i].contiguous()
                    self._set_seq_lens(batch, seq0 + (i + 1), None if seq0_cpu is None else seq0_cpu + (i + 1))
                    batch.spec_info = draft_step
                    out = self.target_worker.forward_batch_generation(
                        batch, is_verify=True, capture_hidden_mode=CaptureHiddenMode.NULL
                    )
                    logits = out.logits_output.next_token_logits
                    if self._draft_graphs is not None and out.can_run_cuda_graph:
                        replayed = self._draft_graphs
                sampling.apply_logit_adjustments(logits, si, 1, drafts, i, orch)  # after d_1 … d_i
                if params is None:  # all greedy: the argmax goes straight into the round's draft column
                    tok = argmax_rows(logits, out=drafts[:, i])
                    continue
                greedy_tok = argmax_rows(logits)
                q = sampling.filtered_probs(logits, *params["filters"])
                if draft_probs is None:
                    draft_probs = torch.empty((bs, G, q.shape[-1]), dtype=q.dtype, device=dev)
                draft_probs[:, i] = q
                drawn = sampling.sample_from_probs(q, torch.rand(bs, device=dev))
                tok = torch.where(params["greedy_rows"], greedy_tok, drawn)
                drafts[:, i] = tok
        batch.return_logprob = return_logprob
        if timer is not None:
            timer.mark("draft")

        # ---- 2. verify: one forward over [last, d_1 … d_γ] with the INT8 view ----
        window = torch.cat([last.unsqueeze(1), drafts], dim=1)  # [bs, G+1]
        out = self._verify_forward(batch, window, win_pos, win_loc, seq0, seq0_cpu)
        if timer is not None:
            timer.mark("verify")
        logits_output = out.logits_output
        logits = logits_output.next_token_logits  # [bs*(G+1), V]
        sampling.apply_logit_adjustments(logits, si, G + 1, drafts, orch=orch)
        if batch.has_grammar:  # after the adjustments, as in SGLang's chain verifiers: masked tokens stay -inf
            accept.apply_grammar(batch, window, logits)

        # ---- 3. accept ----
        V = logits.shape[-1]
        tokens, accept_lens = accept.accept(drafts, logits.view(bs, G + 1, V), params, draft_probs, self._simulate)
        new_seq_lens = seq0 + accept_lens.to(seq0.dtype)
        if orch is not None:  # the penalizers see every accepted token (the scheduler feeds only the last one)
            penalties.cumulate_accepted(orch, tokens, accept_lens)
        if self._pages is not None:  # page scores are per batch row: turn them into per-slot pages right away
            self._pages.after_verify(batch.req_pool_indices, seq0, new_seq_lens)
        self.mark_verified(batch, True)
        rows = torch.arange(bs, device=dev)
        next_tokens = tokens[rows, accept_lens - 1]

        if batch.return_logprob:
            accept.logprobs(batch, logits_output, tokens, accept_lens)
        batch.forward_mode = ForwardMode.DECODE
        war_release.publish(war_release.read_done_runner(self), read_done)  # the runner the scheduler's WAR barrier reads
        if timer is not None:
            timer.mark("accept")
            timer.end()

        return GenerationBatchResult(
            logits_output=logits_output,
            next_token_ids=tokens.reshape(-1),  # stride γ+1; the first accept_lens[b] of row b are emitted
            can_run_cuda_graph=out.can_run_cuda_graph,
            accept_lens=accept_lens.to(torch.int32),
            new_seq_lens=new_seq_lens,
            next_draft_input=QuantSpecDraftInput(next_tokens, G + 1),
            speculative_num_draft_tokens=G + 1,
        )

    # ---- auto-off --------------------------------------------------------------------------------------------------
    def _policy(self) -> autooff.AutoOff:
        if self._auto is None:
            self._auto = autooff.for_worker(self.server_args, self.model_runner, self.gamma,
                                            int4_weights=self._resolve_int4_draft())
        return self._auto

    @staticmethod
    def _kv_tokens(batch) -> int:
        """Σ committed lengths, from the host copies the scheduler keeps (no device sync)."""
        if batch.seq_lens_sum is not None:
            return int(batch.seq_lens_sum)
        if batch.seq_lens_cpu is not None:
            return int(batch.seq_lens_cpu.sum())
        # Overlap scheduling without a host copy of the lengths (the backend's needs_cpu_seq_lens = False): the
        # requests' host token counts, which lag by at most the round in flight (a cost-model input only).
        return sum(len(r.origin_input_ids) + len(r.output_ids) for r in batch.reqs)

    def on_verify_complete_cpu(self, num_correct_drafts_per_req, batch_size: int = 0) -> None:
        """SGLang's hook once a step's accept counts are on the host: α for the auto-off policy."""
        if self._auto is not None:
            self._auto.on_accept(num_correct_drafts_per_req)

    # ---- helpers ---------------------------------------------------------------------------------------------------
    @staticmethod
    def _window(batch, width: int):
        """Positions [bs, width] from the committed length on, and their KV slots (int64)."""
        seq0 = batch.seq_lens
        pos = seq0.unsqueeze(1) + torch.arange(width, device=seq0.device, dtype=seq0.dtype)
        loc = batch.req_to_token_pool.req_to_token[batch.req_pool_indices.unsqueeze(1), pos].to(torch.int64)
        return pos, loc

    def _verify_forward(self, batch, window: torch.Tensor, pos: torch.Tensor, loc: torch.Tensor, seq0, seq0_cpu):
        """One TARGET_VERIFY forward over ``window`` [bs, w] at ``pos`` into slots ``loc`` (the INT8 view);
        ``seq0``/``seq0_cpu``: the committed lengths (the draft passes moved ``batch.seq_lens`` on)."""
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        batch.input_ids = window.reshape(-1)
        batch.out_cache_loc = loc.reshape(-1)
        self._set_seq_lens(batch, seq0, seq0_cpu)
        batch.spec_info = QuantSpecVerifyInput(batch.input_ids, pos.reshape(-1), window.shape[1])
        return self.target_worker.forward_batch_generation(batch, is_verify=True)

    @staticmethod
    def _set_seq_lens(batch, seq_lens: torch.Tensor, seq_lens_cpu: Optional[torch.Tensor]):
        batch.seq_lens = seq_lens
        batch.orig_seq_lens = seq_lens
        batch.seq_lens_cpu = seq_lens_cpu
        batch.seq_lens_sum = None if seq_lens_cpu is None else int(seq_lens_cpu.sum())
