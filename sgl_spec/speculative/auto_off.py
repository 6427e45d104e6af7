"""Auto-off: per decode batch, speculate or take one plain INT8 step, whichever is predicted to decode faster.

Why: a round costs γ draft forwards + one verify and emits τ(α, γ) tokens per request; where the drafts cost more than
the extra tokens are worth (short contexts, large batches, low α), a user who turns quantspec on must not decode
slower than without speculation. So at the start of every decode step the worker asks ``AutoOff.decide(b, Σ ctx)``:

* ``SPEC``: the normal round (``QuantSpecWorker._decode``).
* ``VERIFY``: a plain step shaped like a verify: the window ``[t, t, …, t]`` (γ+1 rows, so SGLang's TARGET_VERIFY
  CUDA graph replays) of which only row 0 is used. Row 0 reads the INT8 view at the committed position exactly as a
  plain decode step does (later rows are causally after it); rows 1… write K/V only at positions the next window
  rewrites before anything reads them, like rejected drafts (docs/CONTRACTS.md).
* ``DECODE``: one DECODE forward of one token outside draft mode (eager): the plain step where no verify graph can
  run (CUDA graphs off, a batch above --cuda-graph-max-bs, CPU), so γ padding rows would cost without helping.

Either plain step emits one token per request through ``sampling.verify_chain`` with zero drafts (argmax, or a draw
from the filtered target distribution), so the output is that of the INT8-only mode: lossless. SGLang sees a round
with accept length 1 (its metrics stay meaningful); the worker marks every request's slot as "no verified pages
yet", so the next round drafts with its recent pages (pagetable.StreamingPages) instead of a stale top-k list.

Step costs. The prior is the analytic model of sgl_spec.speculative.cost_model (weight bytes + KV bytes + per-token compute +
fixed costs): a fitted JSON (``--quantspec-cost-model``, bench_e2e.py writes one per GPU and model) or the datasheet
defaults. It is corrected online by what this server measures: the host wall time from the start of one decode step
to the start of the next. The scheduler waits for every step's results (without overlap) or for its published
lengths (with overlap) before it starts the next step, so that interval is the step's whole cost, scheduler work
included where it is not hidden, and reading a host clock costs no device sync. Each interval is divided by the
prior's prediction for that step; the median of the recent ratios of the step's (kind, batch bucket, context bucket),
else of its kind, scales the prior. Why not CUDA events: they miss the host work that makes eager drafts expensive.
Why not a calibration at startup: it needs synthetic batches through SGLang's allocator before any request, and what
matters is the steady state of this server (its batch mix, clocks, caches), which the running steps measure.

α comes from the accept counts SGLang has already copied to the host (``on_verify_complete_cpu``), from rounds whose
draft pages a previous verify chose: a running mean that starts from the prior ``alpha0`` with the weight of
``alpha_prior_weight`` rounds, an EMA (``alpha_ema``) once it has seen 1/alpha_ema rounds.
Exploration: the first ``warmup_skip + explore`` decode steps speculate and the next ``warmup_skip + explore // 2``
take plain steps, so both kinds are measured before the prior alone can decide (a tiny model at batch 1 is
launch-bound and the datasheet prior says plain, yet on an H200 rounds measured 1.3-1.4x faster there);
while speculating, one plain step every ``probe_every`` decisions; while not, a probe of ``probe_len`` rounds (the
first one re-chooses draft pages, the others measure α with them).
"""
from __future__ import annotations

import logging
import math
import time
from collections import Counter, deque
from typing import Optional

import torch

from sgl_spec import knobs
from sgl_spec.speculative import accept
from sgl_spec.speculative import cost_model as cm
from sgl_spec.speculative import sampling, war_release

logger = logging.getLogger(__name__)

SPEC, VERIFY, DECODE = "spec", "verify", "decode"
MODES = ("auto", "always", "never")
_MAX_LOG_RATIO = math.log(16.0)  # a ratio beyond 16x is an outlier (a first-use compilation, a stall): clipped


def _bucket(b: int, kv_tokens: float) -> tuple[int, int]:
    """Batch and mean context, each rounded to a power of two (contexts from 1 Ki)."""
    ctx = kv_tokens / max(b, 1)
    return round(math.log2(max(b, 1))), round(math.log2(max(ctx, 1024.0) / 1024.0))


class AutoOff:
    """The per-step switch (module docstring). ``mode``: "auto", "always" (speculate every step) or "never" (plain
    steps only). ``graph_max_bs``: the largest batch whose verify replays a CUDA graph (0: none)."""

    def __init__(self, model: Optional[cm.CostModel], gamma: int, *, mode: str = "auto", graph_max_bs: int = 0,
                 margin: float = cm.DEFAULT_MARGIN, hysteresis: float = 0.03, alpha0: float = 0.6,
                 alpha_ema: float = 0.1, alpha_prior_weight: float = 2.0, probe_every: int = 128, probe_len: int = 2,
                 warmup_skip: int = 2, explore: int = 4, keep: int = 5, clock=time.perf_counter,
                 log_every: int = 4096):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mode == "auto" and model is None:
            raise ValueError("auto mode needs a cost model")
        self.model, self.gamma, self.mode, self.graph_max_bs = model, int(gamma), mode, int(graph_max_bs)
        self.margin, self.hysteresis, self.alpha, self.alpha_ema = margin, hysteresis, float(alpha0), alpha_ema
        self.alpha_prior_weight, self._alpha_n = float(alpha_prior_weight), 0
        self.probe_every, self.probe_len, self.warmup_skip, self.keep = probe_every, probe_len, warmup_skip, keep
        self.explore = int(explore)
        self.clock, self.log_every = clock, log_every
        self.on = True  # the last non-probe decision
        self.counts = Counter()  # decisions per step kind
        self._prev = None  # (kind, b, kv_tokens, start time) of the step in flight
        self._skip = 0  # decode steps after a prefill that are not measured (they wait for the prefill's GPU work)
        self._last, self._fresh = None, False  # last step's kind; whether its draft pages came from a verify
        self._since_plain = self._since_spec = 0
        self._probe_left = 0
        self._seen = Counter()  # measured steps per kind (the first warmup_skip are compilations)
        self._ratios: dict = {}  # (kind, bucket) or kind -> deque of log(measured / predicted)

    # ---- the model, corrected by measurements ---------------------------------------------------------------------
    def plain_kind(self, b: int, kv_tokens: float) -> str:
        """DECODE where no verify graph can run; else the cheaper of the two by the (corrected) model: a padded
        verify costs γ more tokens of compute, an eager decode the launch overhead of every kernel. Only the kind
        taken is measured, so an underestimated kind gets taken, measured and corrected: no lock-in."""
        if not 0 < b <= self.graph_max_bs or self.model is None:
            return VERIFY if 0 < b <= self.graph_max_bs else DECODE
        return VERIFY if self.estimate(VERIFY, b, kv_tokens) <= self.estimate(DECODE, b, kv_tokens) else DECODE

    def predict(self, kind: str, b: int, kv_tokens: float) -> float:
        """The prior's seconds for one step of ``kind``."""
        m = self.model
        if kind == SPEC:
            return m.round_time(b, kv_tokens, self.gamma)
        if kind == VERIFY:
            return m.step_time("verify", b, kv_tokens, self.gamma)
        return m.step_time("ar_int8_eager" if "ar_int8_eager" in m.steps else "ar_int8", b, kv_tokens)

    def correction(self, kind: str, b: int, kv_tokens: float) -> float:
        for key in ((kind, _bucket(b, kv_tokens)), kind):
            r = self._ratios.get(key)
            if r:
                s = sorted(r)
                return math.exp(s[len(s) // 2])
        return 1.0

    def estimate(self, kind: str, b: int, kv_tokens: float) -> float:
        return self.predict(kind, b, kv_tokens) * self.correction(kind, b, kv_tokens)

    def speedup(self, b: int, kv_tokens: float) -> float:
        """Predicted tokens/s of speculation over this batch's plain step, at the current α."""
        plain = self.estimate(self.plain_kind(b, kv_tokens), b, kv_tokens)
        return cm.expected_tokens(self.alpha, self.gamma) * plain / self.estimate(SPEC, b, kv_tokens)

    # ---- what the worker calls -------------------------------------------------------------------------------------
    def decide(self, b: int, kv_tokens: float, now: Optional[float] = None) -> str:
        """The kind of this decode step (SPEC, VERIFY or DECODE); closes the previous step's time measurement."""
        now = self.clock() if now is None else now
        if self._prev is not None and self.mode == "auto":
            if self._skip > 0:
                self._skip -= 1
            else:
                self._measure(*self._prev, now)
        kind = self._choose(b, kv_tokens)
        self._fresh = kind == SPEC and self._last == SPEC
        self._prev, self._last = (kind, b, kv_tokens, now), kind
        self.counts[kind] += 1
        if self.log_every and sum(self.counts.values()) % self.log_every == 0:
            logger.info("quantspec %s", self.describe(b, kv_tokens))
        return kind

    def note_other(self) -> None:
        """A non-decode forward (prefill, idle) ran: the interval since the last decode step is not a step cost, and
        neither is the next decode step's: its forward queues behind the prefill's GPU work (H200 e2e: right after
        32 requests arrived, rounds measured >= 16x the model and turned speculation off for hundreds of steps)."""
        self._prev = None
        self._skip = 1
        self._last = None  # a request that just joined drafts without verified pages: the next round is not fresh

    def on_accept(self, num_correct_per_req) -> None:
        """Accepted drafts per request of the step just processed (host list, from SGLang's result processor)."""
        if self._last != SPEC or not self._fresh or not num_correct_per_req:
            return
        tau = 1.0 + sum(num_correct_per_req) / len(num_correct_per_req)
        self._alpha_n += 1
        w = max(self.alpha_ema, 1.0 / (self._alpha_n + self.alpha_prior_weight))
        self.alpha += w * (cm.alpha_from_tokens(tau, self.gamma) - self.alpha)

    def describe(self, b: int, kv_tokens: float) -> str:
        n = max(sum(self.counts.values()), 1)
        shares = ", ".join(f"{k} {100.0 * v / n:.0f}%" for k, v in sorted(self.counts.items()))
        if self.mode != "auto":
            return f"speculate={self.mode}: {n} steps ({shares})"
        plain = self.plain_kind(b, kv_tokens)
        return (f"speculate=auto: {n} steps ({shares}); α {self.alpha:.2f}; at b={b} ctx={kv_tokens / max(b, 1):.0f}: "
                f"predicted speedup {self.speedup(b, kv_tokens):.2f}, measured/model spec "
                f"{self.correction(SPEC, b, kv_tokens):.2f} {plain} {self.correction(plain, b, kv_tokens):.2f}")

    # ---- internals -------------------------------------------------------------------------------------------------
    def _choose(self, b: int, kv_tokens: float) -> str:
        plain = self.plain_kind(b, kv_tokens)
        if self.mode != "auto":
            return SPEC if self.mode == "always" else plain
        if self._probe_left > 0:
            self._probe_left -= 1
            return SPEC
        if self._seen[SPEC] < self.warmup_skip + self.explore:  # measure rounds before trusting the prior
            return SPEC  # then plain steps (either kind), so both are measured
        if self.explore and self._seen[VERIFY] + self._seen[DECODE] < self.warmup_skip + max(1, self.explore // 2):
            return plain
        self.on = self.speedup(b, kv_tokens) >= 1.0 + self.margin + (0.0 if self.on else self.hysteresis)
        if self.on:
            self._since_spec, self._since_plain = 0, self._since_plain + 1
            if self._since_plain >= self.probe_every:  # keep the plain step's cost current
                self._since_plain = 0
                return plain
            return SPEC
        self._since_plain, self._since_spec = 0, self._since_spec + 1
        if self._since_spec >= self.probe_every:  # α and the round cost cannot be observed without rounds
            self._since_spec, self._probe_left = 0, self.probe_len - 1
            return SPEC
        return plain

    def _measure(self, kind: str, b: int, kv_tokens: float, t0: float, now: float) -> None:
        self._seen[kind] += 1
        if self._seen[kind] <= self.warmup_skip:
            return
        pred = self.predict(kind, b, kv_tokens)
        if pred <= 0 or now <= t0:
            return
        r = min(max(math.log((now - t0) / pred), -_MAX_LOG_RATIO), _MAX_LOG_RATIO)
        for key, n in (((kind, _bucket(b, kv_tokens)), self.keep), (kind, 3 * self.keep)):
            self._ratios.setdefault(key, deque(maxlen=n)).append(r)


def decode_graph_max_bs(server_args) -> int:
    """The largest batch SGLang captures decode/verify CUDA graphs for (0: none). sglang 0.5.17 keeps it in
    ``cuda_graph_config.decode.max_bs`` (``--cuda-graph-max-bs`` is stored as ``cuda_graph_max_bs_decode``); reading
    the old ``cuda_graph_max_bs`` attribute gave 0 there, so every plain step ran eagerly."""
    from sgl_spec.patches import sglang

    def get(name):
        return sglang().resolved(server_args, name) if hasattr(server_args, name) else None

    if get("disable_cuda_graph") or get("disable_decode_cuda_graph"):
        return 0
    decode = getattr(get("cuda_graph_config"), "decode", None)
    if decode is not None:
        if str(getattr(decode, "backend", "full")) == "disabled":
            return 0
        if getattr(decode, "max_bs", None):
            return int(decode.max_bs)
    return int(get("cuda_graph_max_bs_decode") or get("cuda_graph_max_bs") or 0)


def for_worker(server_args, model_runner, gamma: int, int4_weights: bool = False) -> AutoOff:
    """The worker's AutoOff from the server's quantspec config (``--quantspec-speculate``, ``--quantspec-cost-model``)
    and its model (``int4_weights``: the drafts read the 4-bit copy of the linears). Without a quantspec config (unit
    tests) or without a model shape it speculates always."""
    from sgl_spec.config import get_config

    cfg = get_config(server_args)
    mode = cfg.speculate if cfg is not None else "always"
    from sgl_spec.patches import sglang

    device = sglang().resolved(server_args, "device") if hasattr(server_args, "device") else ""
    cuda = str(device).startswith("cuda")
    graph_max_bs = decode_graph_max_bs(server_args) if cuda else 0
    if mode != "auto":
        return AutoOff(None, gamma, mode=mode, graph_max_bs=graph_max_bs)
    try:
        hf = model_runner.model_config.hf_text_config
        shape = cm.ModelShape.from_hf_config(hf if isinstance(hf, dict) else hf.to_dict(), page_size=cfg.page_size)
    except (AttributeError, KeyError, TypeError) as exc:
        logger.warning("quantspec: no model shape for the cost model (%s): speculating every step", exc)
        return AutoOff(None, gamma, mode="always", graph_max_bs=graph_max_bs)
    draft = cm.DraftConfig(cfg.dense_draft, cfg.topk_ratio, cfg.min_pages, cfg.sink_pages,
                           4 if int4_weights else None)
    model = cm.default_cost_model(shape, torch.cuda.get_device_name() if cuda else None, draft)
    if cfg.cost_model:  # a fitted model; kinds it lacks keep the defaults
        loaded = cm.CostModel.load(cfg.cost_model)
        model = cm.CostModel(shape, {**model.steps, **loaded.steps}, draft, loaded.source, loaded.fit_info)
    logger.info("quantspec speculate=auto: cost model %s, plain steps %s", model.source,
                f"in the verify CUDA graph up to batch {graph_max_bs}" if graph_max_bs else "eager")
    # SGL_SPEC_AUTO_LOG=N (debugging): log the policy's state every N decisions instead of every 4096
    log_every = int(knobs.get("AUTO_LOG", "4096"))
    return AutoOff(model, gamma, mode="auto", graph_max_bs=graph_max_bs, log_every=log_every)


def plain_step(worker, batch, last, kind: str):
    """One non-speculative step of ``kind`` (VERIFY or DECODE, module docstring) for the worker's decode batch:
    one token per request, the GenerationBatchResult a round would return with every accept length 1."""
    from sglang.srt.managers.utils import GenerationBatchResult
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    from sgl_spec.speculative.spec_info import QuantSpecDraftInput, QuantSpecDraftStep

    G, bs = worker.gamma, len(batch.reqs)
    seq0, seq0_cpu = batch.seq_lens, batch.seq_lens_cpu
    dev = seq0.device
    w = G + 1 if kind == VERIFY else 1
    pos, loc = worker._window(batch, w)  # [bs, w]
    window = last.unsqueeze(1).expand(bs, w)  # rows 1…: placeholders whose outputs are never used
    si = batch.sampling_info
    params = accept.sampling_params(si)
    if kind == VERIFY:
        out = worker._verify_forward(batch, window, pos, loc, seq0, seq0_cpu)
    else:
        return_logprob = batch.return_logprob
        batch.return_logprob = False  # logprobs come from _logprobs below, as for a round
        batch.forward_mode = ForwardMode.DECODE
        batch.input_ids = last
        batch.out_cache_loc = loc[:, 0].contiguous()
        worker._set_seq_lens(batch, seq0 + 1, None if seq0_cpu is None else seq0_cpu + 1)
        batch.spec_info = QuantSpecDraftStep()  # one token per request: never a verify-width CUDA graph
        out = worker.target_worker.forward_batch_generation(batch, is_verify=True)
        batch.return_logprob = return_logprob
        worker._set_seq_lens(batch, seq0, seq0_cpu)
    logits_output = out.logits_output
    logits = logits_output.next_token_logits  # [bs * w, V]
    sampling.apply_logit_adjustments(logits, si, w)
    if batch.has_grammar:
        accept.apply_grammar(batch, window.contiguous(), logits)
    V = logits.shape[-1]
    row0 = logits.view(bs, w, V)[:, :1]
    no_drafts = torch.empty((bs, 0), dtype=torch.int64, device=dev)
    tok, accept_lens = accept.accept(no_drafts, row0, params)
    tokens = torch.zeros((bs, w), dtype=torch.int64, device=dev)
    tokens[:, :1] = tok
    if batch.return_logprob:
        accept.logprobs(batch, logits_output, tokens, accept_lens)
    worker.mark_verified(batch, False)  # no verify chose pages this step: the next round drafts with recent pages
    batch.forward_mode = ForwardMode.DECODE
    # the step's last reads (acceptance, logprobs) follow its forward: keep the scheduler's whole-forward barrier,
    # whatever event a verify graph replay published mid-forward
    war_release.publish(war_release.read_done_runner(worker), None)
    return GenerationBatchResult(
        logits_output=logits_output,
        next_token_ids=tokens.reshape(-1),  # stride w; the first token of each row is emitted
        can_run_cuda_graph=out.can_run_cuda_graph,
        accept_lens=accept_lens.to(torch.int32),
        new_seq_lens=seq0 + 1,
        next_draft_input=QuantSpecDraftInput(tokens[:, 0], G + 1),
        speculative_num_draft_tokens=w,
    )
