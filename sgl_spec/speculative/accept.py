"""The accept step of a speculation window against SGLang's batch: the requests' sampling filters as tensors,
grammar masks on the verify logits, lossless acceptance (:func:`sgl_spec.speculative.sampling.verify_chain`, with the random
draws taken here) and the emitted tokens' logprobs. Shared by the worker's rounds (:mod:`sgl_spec.speculative.worker`) and the
auto-off plain steps (:mod:`sgl_spec.speculative.auto_off`)."""
from __future__ import annotations

from typing import Optional

import torch

from sgl_spec import knobs
from sgl_spec.speculative import sampling


SIMULATE_ENV = knobs.name("SIMULATE_ACCEPT")  # benchmarking: keep each matching greedy draft with this probability


def simulated_alpha() -> Optional[float]:
    """``SGL_SPEC_SIMULATE_ACCEPT`` (benchmarking, e.g. 0.9) as a float in (0, 1], else None. Random-weight models
    accept every draft; with it each greedy draft the target would accept is kept i.i.d. with that probability, so a
    benchmark of a dummy model sees a chosen acceptance. Output stays the target's greedy output (a dropped draft
    is replaced by the target's token); only acceptance, and so speed, is simulated."""
    raw = knobs.get("SIMULATE_ACCEPT")
    if not raw:
        return None
    alpha = float(raw)
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"{SIMULATE_ENV} must be in (0, 1], got {raw!r}")
    return alpha


def accept(drafts: torch.Tensor, logits: torch.Tensor, params: Optional[dict], draft_probs=None,
           simulate: Optional[float] = None):
    """sampling.verify_chain over ``drafts`` [bs, n] and target ``logits`` [bs, n+1, V]: greedy, or rejection
    sampling with the requests' filters (n = 0: a plain step, one token drawn from the target). ``simulate``: the
    acceptance simulator's α for greedy requests (``simulated_alpha``)."""
    if simulate is not None and drafts.shape[1]:
        keep = torch.rand(drafts.shape, device=logits.device) < simulate
        g_tokens, g_lens = sampling.greedy_accept(drafts, logits.argmax(dim=-1), keep)
        if params is None:
            return g_tokens, g_lens
        s_tokens, s_lens = accept(drafts, logits, params, draft_probs)
        greedy = params["greedy_rows"]
        return torch.where(greedy.view(-1, 1), g_tokens, s_tokens), torch.where(greedy, g_lens, s_lens)
    if params is None:
        return sampling.verify_chain(drafts, logits)
    bs, n = drafts.shape
    dev = logits.device
    if draft_probs is None:  # no drafts: nothing to compare against
        draft_probs = torch.empty((bs, 0, logits.shape[-1]), dtype=torch.float32, device=dev)
    temps, top_ks, top_ps, min_ps = params["filters"]
    return sampling.verify_chain(
        drafts, logits, draft_probs=draft_probs, temperatures=temps, top_ks=top_ks, top_ps=top_ps, min_ps=min_ps,
        greedy_rows=params["greedy_rows"],
        # no draws for an empty draft chain, so a plain step consumes the same random numbers as before
        u_accept=torch.rand((bs, n), device=dev) if n else torch.empty((bs, 0), device=dev),
        u_final=torch.rand((bs,), device=dev),
    )


def sampling_params(si) -> Optional[dict]:
    """Per-request filters as tensors (None for an all-greedy batch, which skips every probability tensor)."""
    if si is None or si.is_all_greedy:
        return None
    return {
        "filters": (
            si.temperatures.view(-1),
            si.top_ks if si.need_top_k_sampling else None,
            si.top_ps if si.need_top_p_sampling else None,
            si.min_ps if si.need_min_p_sampling else None,
        ),
        # SGLang encodes temperature 0 as top_k = 1: those requests use exact argmax matching.
        "greedy_rows": si.top_ks.view(-1) <= 1,
    }


def apply_grammar(batch, window: torch.Tensor, logits: torch.Tensor):
    from sglang.srt.speculative.spec_utils import GrammarTree, build_grammar_vocab_mask

    mask = build_grammar_vocab_mask(
        reqs=batch.reqs,
        tree=GrammarTree.from_linear_chain(window),
        sampling_info=batch.sampling_info,
        device=logits.device,
        barrier=None,
    )
    if mask is not None:
        mask.apply(logits)


def logprobs(batch, logits_output, tokens: torch.Tensor, accept_lens: torch.Tensor):
    from sgl_spec.patches import sglang

    bs, G1 = tokens.shape
    j = torch.arange(G1, device=tokens.device)
    flat = torch.arange(bs, device=tokens.device).unsqueeze(1) * G1 + j
    accept_index = torch.where(j < accept_lens.unsqueeze(1), flat, torch.full_like(flat, -1))
    sglang().spec_logprobs(batch, logits_output, tokens.reshape(-1), accept_index)
