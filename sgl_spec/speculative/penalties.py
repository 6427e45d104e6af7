"""SGLang's sampling penalties applied exactly to a speculative window (frequency, presence, repetition,
min_new_tokens).

Why: SGLang's own speculative decoding applies penalties in a *relaxed* form: every row of a window sees the state of
the window's start, and the scheduler feeds the penalizers one token per round (``cumulate_penalty_output_tokens``
reads ``req.output_ids[-1]``), so the tokens accepted inside a window never count. The output then drifts from what
the same penalties give without speculation. Where the scheduler's ``BatchedPenalizerOrchestrator`` reaches the worker
(SGLang's non-overlap scheduler: CPU, or ``--disable-overlap-schedule``), this module makes row ``r`` of a window see
the penalties of autoregressive decoding after the window's first ``r`` drafts, and feeds the penalizers every
accepted token; so a penalized request's output equals the non-speculative INT8 mode's under the same scheduler.

Row ``r`` of a window ``[last, d_1 … d_γ]`` predicts the token after ``d_1 … d_r``: the orchestrator's state (which
already holds ``last``) plus, per penalizer, in the orchestrator's own order (SGLang applies them one after another,
and an additive step before or after the repetition scaling changes the result):
* frequency: ``- f · #{j <= r: d_j = v}`` more;
* presence: ``- p`` for a ``v`` among ``d_1 … d_r`` that the state had not seen;
* repetition: the scaling of such a ``v`` (``x < 0 ? x·ρ : x/ρ``), once per distinct token;
* min_new_tokens: the stop tokens masked while ``len + r < min_new_tokens``.
Penalizers it does not know are applied as SGLang's relaxed form (state of the window's start). Under the overlap
scheduler the worker only gets the accumulated tensors of a copy (SGLang's ``copy_for_forward``), and the relaxed form
of sampling.apply_logit_adjustments stays, as in SGLang's own overlap decoding.
"""
from __future__ import annotations

import torch

_FREQ, _PRES, _REP, _MIN = ("BatchedFrequencyPenalizer", "BatchedPresencePenalizer", "BatchedRepetitionPenalizer",
                            "BatchedMinNewTokensPenalizer")


STASH = "_sgl_spec_orchestrator"


def stash_orchestrator(result, info, *args, **kwargs):
    """AFTER hook of ``SamplingBatchInfo.copy_for_forward`` (sgl_spec/plugin.py): SGLang hands a forward a snapshot
    without the orchestrator (``penalizer_orchestrator=None``) and only its accumulated tensors; keep a reference to
    the live one on the snapshot so the worker can read the per-penalizer state and feed it accepted tokens."""
    orch = getattr(info, "penalizer_orchestrator", None)
    if orch is not None and getattr(orch, "is_required", False):
        setattr(result, STASH, orch)
    return result


def orchestrator_of(sampling_info, exact: bool):
    """The live penalizer orchestrator of a batch that needs penalties, if ``exact`` (the non-overlap scheduler: it
    prepares the next batch only after this forward, so nothing else touches the state meanwhile), else None."""
    if not exact:
        return None
    orch = getattr(sampling_info, STASH, None) or getattr(sampling_info, "penalizer_orchestrator", None)
    if orch is None or not getattr(orch, "is_required", False):
        return None
    return orch


def scale(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """SGLang's repetition scaling (``apply_scaling_penalties``), out of place and without torch.compile."""
    return torch.where(x < 0, x * s, x / s)


def _first_occurrence(tokens: torch.Tensor) -> torch.Tensor:
    """[B, K] bool: tokens[b, j] differs from tokens[b, :j]."""
    K = tokens.shape[1]
    same = tokens.unsqueeze(2) == tokens.unsqueeze(1)  # [B, K(j), K(i)]
    earlier = torch.ones(K, K, dtype=torch.bool, device=tokens.device).tril(-1)  # i < j
    return ~(same & earlier).any(dim=2)


def apply_window(orch, logits: torch.Tensor, extra: torch.Tensor, row0: int = 0) -> torch.Tensor:
    """Penalties of every row of ``logits [B, R, V]`` (in place): row ``r`` is window row ``row0 + r``, which comes
    after the tokens ``extra[:, :row0 + r]`` (``extra [B, K]`` token ids, ``K >= row0 + R - 1``) on top of the
    orchestrator's state. A window's verify rows: ``row0 = 0``, ``extra`` = its drafts; draft step ``i``: one row,
    ``row0 = i``, ``extra`` = the drafts before it."""
    B, R, V = logits.shape
    K = row0 + R - 1
    assert extra.shape[0] == B and extra.shape[1] >= K, (tuple(extra.shape), B, K)
    dev = logits.device
    e = extra[:, :K].long()
    rows = torch.arange(R, device=dev) + row0
    seen = (torch.arange(K, device=dev).view(1, K) < rows.view(R, 1)).view(1, R, K)  # d_j (j < r) precedes row r
    first = _first_occurrence(e).view(B, 1, K) if K else None
    idx = e.view(B, 1, K).expand(B, R, K)
    for pen in orch.penalizers.values():
        if not pen.is_prepared():
            continue
        name = type(pen).__name__
        if name == _FREQ:
            state = pen.cumulated_frequency_penalties
            if K:  # the drafts' tokens: x - (state + f + f ...), summed in feeding order as SGLang's scatter_add
                xe = logits.gather(2, idx)
                cum = state.gather(1, e).view(B, 1, K).expand(B, R, K)
                f = pen.frequency_penalties.view(B, 1, 1)
                match = e.view(B, 1, K, 1) == e.view(B, 1, 1, K)
                for jp in range(K):
                    cum = cum + torch.where(match[..., jp] & seen[..., jp:jp + 1], f, 0.0)
            logits.sub_(state.view(B, 1, V))
            if K:
                logits.scatter_(2, idx, xe - cum)
        elif name == _PRES:
            state = pen.cumulated_presence_penalties
            logits.sub_(state.view(B, 1, V))
            if K:
                new = (state.gather(1, e) == 0).view(B, 1, K) & first & seen
                src = (-pen.presence_penalties.view(B, 1, 1)) * new.to(logits.dtype)
                logits.scatter_add_(2, idx, src.expand(B, R, K).contiguous())
        elif name == _REP:
            state = pen.cumulated_repetition_penalties
            logits.copy_(scale(logits, state.view(B, 1, V)))
            if K:
                new = (state.gather(1, e) == 1).view(B, 1, K) & first & seen  # [B, R, K]
                rho = pen.repetition_penalties.view(B, 1)
                for j in range(K):  # distinct tokens: one scaling per (row, token) at most
                    col = idx[:, :, j:j + 1]
                    v = logits.gather(2, col)
                    logits.scatter_(2, col, torch.where(new[:, :, j:j + 1], scale(v, rho.view(B, 1, 1)), v))
        elif name == _MIN:
            masked = (pen.len_output_tokens.view(B, 1) + rows.view(1, R)) < pen.min_new_tokens.view(B, 1)
            logits.add_(torch.where(masked.view(B, R, 1), pen.stop_token_penalties.view(B, 1, V), 0.0))
        else:  # unknown penalizer: SGLang's relaxed form
            flat = logits.view(B * R, V)
            if getattr(pen, "is_multiplicative", False):
                s = torch.repeat_interleave(pen.get_scaling_penalties(), R, dim=0)
                flat.copy_(scale(flat, s))
            else:
                add = torch.zeros((B, V), dtype=logits.dtype, device=dev)
                pen.apply(add)
                flat.add_(torch.repeat_interleave(add, R, dim=0))
    return logits


def cumulate_accepted(orch, tokens: torch.Tensor, accept_lens: torch.Tensor) -> None:
    """Feed the penalizers the tokens a round accepted before its last one: ``tokens [B, ≥ n]``, ``accept_lens [B]``
    (bonus included). The scheduler feeds the last one itself before the next round (``output_ids[-1]``)."""
    B = tokens.shape[0]
    n = int(tokens.shape[1])
    if n < 2:
        return
    t = tokens[:, : n - 1].long()
    valid = torch.arange(n - 1, device=t.device).view(1, -1) < (accept_lens.view(B, 1).long() - 1)
    # invalid slots point at the round's last token, which the scheduler feeds next: idempotent penalizers may take
    # it early; the frequency count masks them out
    last = tokens.gather(1, (accept_lens.view(B, 1).long() - 1).clamp(min=0)).long()
    t = torch.where(valid, t, last)
    for pen in orch.penalizers.values():
        if not pen.is_prepared():
            continue
        name = type(pen).__name__
        if name == _FREQ:  # one column at a time: the same sums, in the same order, as feeding them one by one
            src = pen.frequency_penalties * valid.float()
            for j in range(n - 1):
                pen.cumulated_frequency_penalties.scatter_add_(1, t[:, j:j + 1], src[:, j:j + 1])
        elif name == _PRES:
            pen.cumulated_presence_penalties.scatter_(1, t, pen.presence_penalties.expand(B, n - 1))
        elif name == _REP:
            pen.cumulated_repetition_penalties.scatter_(1, t, pen.repetition_penalties.expand(B, n - 1))
        elif name == _MIN:
            pen.len_output_tokens += (accept_lens.view(B, 1) - 1).clamp(min=0).to(pen.len_output_tokens.dtype)
        # unknown penalizers keep SGLang's one token a round
