"""Lossless acceptance for chain speculation: greedy matching and rejection sampling.

Pure tensor functions; every random draw is an argument (a tensor of uniforms in [0, 1)), so tests are exact and
the worker decides where randomness comes from. Shapes: ``B`` requests, ``G`` = γ draft tokens per request,
``V`` vocabulary. The verify window of a request is ``[last token, d_1 … d_G]``; verify row ``j`` predicts the
token after ``d_j`` (row 0: after the last accepted token), so row ``j`` checks draft ``d_{j+1}`` and row ``G`` is
the bonus row.

Outputs follow SGLang's spec-v2 layout: ``tokens [B, G+1]`` (the first ``accept_lens[b]`` entries of row ``b`` are
emitted, the rest are padding) and ``accept_lens [B]`` *including* the bonus/correction token (1 … G+1).

Sampling semantics (what "the target distribution" is). SGLang's sampler (``layers/sampler.py``, pytorch and
flashinfer "joint" paths) turns logits into ``softmax(logits / T)`` and then keeps a token iff its rank is
``< top_k``, the mass strictly before it (in descending order, *unrenormalized*) is ``<= top_p``, and (min_p)
its probability is ``>= min_p * max_prob``; the survivors are renormalized. :func:`filtered_probs` implements
exactly that, and the worker applies it to the draft logits (q) and the verify logits (p) alike. Rejection
sampling (Leviathan et al. 2023, Chen et al. 2023) then emits tokens distributed exactly as autoregressive
sampling from p would; greedy requests (``top_k == 1``, which is how SGLang encodes temperature 0) use argmax
matching, which is the same rule with one-hot p and q but immune to ties in a sort.
"""
from __future__ import annotations

from typing import Optional

import torch

from sgl_spec.speculative import penalties

# SGLang encodes "no top-k" as 1 << 30 (sampling_params.TOP_K_ALL); anything >= V means "keep all".


def filtered_probs(
    logits: torch.Tensor,
    temperatures: torch.Tensor,
    top_ks: Optional[torch.Tensor] = None,
    top_ps: Optional[torch.Tensor] = None,
    min_ps: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """``logits [N, V]`` → fp32 probabilities ``[N, V]`` after temperature, top-k, top-p and min-p (see module doc).

    ``temperatures [N]`` or ``[N, 1]`` (> 0); ``top_ks [N]`` int, ``top_ps [N]``, ``min_ps [N]`` float, each
    optional (``None`` = filter off for the whole batch, which skips the per-row sort).
    """
    probs = torch.softmax(logits.float() / temperatures.reshape(-1, 1).float(), dim=-1)
    if top_ks is None and top_ps is None and min_ps is None:
        return probs
    sorted_p, order = probs.sort(dim=-1, descending=True)
    keep = torch.ones_like(sorted_p, dtype=torch.bool)
    if top_ks is not None:
        rank = torch.arange(sorted_p.shape[-1], device=probs.device).view(1, -1)
        keep &= rank < top_ks.view(-1, 1)
    if top_ps is not None:
        # Mass before each token, on the unfiltered distribution ("joint" filtering, as SGLang does).
        mass_before = torch.cumsum(sorted_p, dim=-1) - sorted_p
        keep &= mass_before <= top_ps.view(-1, 1).float()
    if min_ps is not None:
        keep &= sorted_p >= sorted_p[:, :1] * min_ps.view(-1, 1).float()
    # The top token always survives (rank 0 < k, mass 0 <= p, p_max >= min_p * p_max), so the sum is > 0.
    sorted_p = torch.where(keep, sorted_p, torch.zeros_like(sorted_p))
    sorted_p = sorted_p / sorted_p.sum(dim=-1, keepdim=True)
    return torch.zeros_like(probs).scatter_(-1, order, sorted_p)


def sample_from_probs(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw: ``probs [N, V]`` (need not be normalized, rows must have positive mass), ``u [N]`` in
    [0, 1) → token ids ``[N]`` int64. The chosen token always has positive probability (first index whose
    cumulative mass exceeds ``u * total``)."""
    cdf = torch.cumsum(probs.float(), dim=-1)
    target = (u.float() * cdf[:, -1]).unsqueeze(-1)
    idx = torch.searchsorted(cdf, target, right=True).squeeze(-1)
    return idx.clamp_(max=probs.shape[-1] - 1)


def _accepted_prefix_len(accept: torch.Tensor) -> torch.Tensor:
    """``accept [B, G]`` bool → length of the leading run of True per row ``[B]`` int64."""
    return torch.cumprod(accept.to(torch.int64), dim=-1).sum(dim=-1)


def greedy_accept(draft_tokens: torch.Tensor, target_tokens: torch.Tensor,
                  keep: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``draft_tokens [B, G]``, ``target_tokens [B, G+1]`` (argmax of each verify row) →
    ``(tokens [B, G+1], accept_lens [B])``.

    Accept the longest prefix with ``d_{j+1} == argmax(row j)``, then emit the target's token at the first
    mismatch (or the bonus row). On the accepted prefix the target tokens equal the drafts, so the emitted row is
    simply ``target_tokens`` and nothing needs gathering. ``keep [B, G]`` bool (the acceptance simulator's draws)
    also rejects the drafts where it is False: a rejected draft is replaced by the target's own token, so the
    output stays the target's greedy output and only the accept lengths change."""
    match = draft_tokens == target_tokens[:, :-1]
    n = _accepted_prefix_len(match if keep is None else match & keep)
    return target_tokens.to(torch.int64), n + 1


def rejection_accept(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    u_accept: torch.Tensor,
    u_final: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chain rejection sampling.

    ``draft_tokens [B, G]`` with ``d_{j+1} ~ draft_probs[:, j]`` (``[B, G, V]``, the q the drafts were drawn from),
    ``target_probs [B, G+1, V]``, ``u_accept [B, G]`` and ``u_final [B]`` uniforms in [0, 1).
    Draft ``j`` is accepted iff ``u_accept[:, j] * q(d) < p(d)`` (probability ``min(1, p/q)``); at the first
    rejection ``n`` the emitted token is drawn from ``norm(max(0, p_n - q_n))``, and if all ``G`` are accepted
    from the bonus row ``p_G``. Returns ``(tokens [B, G+1] int64, accept_lens [B])``.
    """
    B, G = draft_tokens.shape
    d = draft_tokens.to(torch.int64).unsqueeze(-1)
    p_d = target_probs[:, :G].gather(-1, d).squeeze(-1)
    q_d = draft_probs.gather(-1, d).squeeze(-1)
    n = _accepted_prefix_len(u_accept.float() * q_d.float() < p_d.float())  # [B] in 0..G

    rows = torch.arange(B, device=draft_tokens.device)
    p_n = target_probs[rows, n].float()
    # q is subtracted only on a rejection (n < G); the bonus row samples p itself.
    if G == 0:  # no drafts (a plain decode step): the token is a draw from p itself
        q_n = torch.zeros_like(p_n)
    else:
        q_n = draft_probs[rows, n.clamp(max=G - 1)].float() * (n < G).unsqueeze(-1)
    residual = (p_n - q_n).clamp_(min=0)
    # Mathematically a rejection implies sum(residual) > 0; guard against fp32 cancellation anyway.
    mass = residual.sum(dim=-1, keepdim=True)
    residual = torch.where(mass > 0, residual, p_n)
    last = sample_from_probs(residual, u_final)

    tokens = torch.cat([draft_tokens.to(torch.int64), draft_tokens.new_zeros(B, 1, dtype=torch.int64)], dim=1)
    tokens.scatter_(1, n.unsqueeze(-1), last.unsqueeze(-1))
    return tokens, n + 1


def verify_chain(
    draft_tokens: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    draft_probs: Optional[torch.Tensor] = None,
    temperatures: Optional[torch.Tensor] = None,
    top_ks: Optional[torch.Tensor] = None,
    top_ps: Optional[torch.Tensor] = None,
    min_ps: Optional[torch.Tensor] = None,
    greedy_rows: Optional[torch.Tensor] = None,
    u_accept: Optional[torch.Tensor] = None,
    u_final: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Acceptance for a batch that may mix greedy and sampled requests.

    ``target_logits [B, G+1, V]`` (penalties/bias already applied). With ``draft_probs`` ``None`` every request is
    greedy. Otherwise ``greedy_rows [B]`` bool marks greedy requests (their ``draft_probs`` rows are ignored) and the
    sampling parameters are per-request tensors as in :func:`filtered_probs`."""
    B, G1, V = target_logits.shape
    target_argmax = target_logits.argmax(dim=-1)
    g_tokens, g_lens = greedy_accept(draft_tokens, target_argmax)
    if draft_probs is None:
        return g_tokens, g_lens

    rep = lambda t: None if t is None else t.reshape(B, 1).expand(B, G1).reshape(-1)  # noqa: E731
    p = filtered_probs(target_logits.reshape(B * G1, V), rep(temperatures), rep(top_ks), rep(top_ps), rep(min_ps))
    s_tokens, s_lens = rejection_accept(draft_tokens, draft_probs, p.view(B, G1, V), u_accept, u_final)
    if greedy_rows is None:
        return s_tokens, s_lens
    return (
        torch.where(greedy_rows.view(B, 1), g_tokens, s_tokens),
        torch.where(greedy_rows, g_lens, s_lens),
    )


def apply_logit_adjustments(logits: torch.Tensor, sampling_info, rows_per_req: int, extra=None, row0: int = 0,
                            orch=None) -> torch.Tensor:
    """Apply SGLang's per-request logit adjustments in place to ``logits [B * rows_per_req, V]``.

    Same order as ``SamplingBatchInfo.apply_logits_bias``: penalties, logit bias, plus custom logit processors.
    Penalties: given the live penalizer orchestrator ``orch`` (non-overlap scheduler, penalties.orchestrator_of)
    exactly as autoregressive decoding would apply them, row ``r`` after the window's tokens ``extra[:, :row0 + r]``
    (sgl_spec/speculative/penalties.py); otherwise from the accumulated tensors of SGLang's ``copy_for_forward`` snapshot in
    SGLang's *relaxed* form, as its own speculative workers: every row sees the penalties accumulated before the
    window. Grammar masks are not handled here.
    """
    def rep(t):
        return t if rows_per_req == 1 else torch.repeat_interleave(t, rows_per_req, dim=0)

    if orch is not None:
        B = logits.shape[0] // rows_per_req
        if extra is None:  # only a lone first row has no window tokens before it
            assert rows_per_req == 1 and row0 == 0, "the window's tokens are needed for rows after its first"
            extra = torch.zeros((B, 0), dtype=torch.int64, device=logits.device)
        penalties.apply_window(orch, logits.view(B, rows_per_req, -1), extra, row0)
    else:
        add = getattr(sampling_info, "acc_additive_penalties", None)
        if add is not None:
            logits.add_(rep(add))
        scaling = getattr(sampling_info, "acc_scaling_penalties", None)
        if scaling is not None:
            logits.copy_(penalties.scale(logits, rep(scaling)))
    bias = getattr(sampling_info, "logit_bias", None)
    if bias is not None:
        logits.add_(rep(bias))
    if getattr(sampling_info, "has_custom_logit_processor", False):
        from sglang.srt.layers.sampler import apply_custom_logit_processor

        apply_custom_logit_processor(logits, sampling_info, num_tokens_in_batch=rows_per_req)
    return logits
