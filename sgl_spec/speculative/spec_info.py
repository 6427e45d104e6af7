"""The ``spec_info`` objects quantspec hands SGLang's scheduler and forward batches (sgl_spec/speculative/worker.py uses them)."""
from __future__ import annotations

import torch

from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode
from sglang.srt.speculative.spec_info import SpecInput, SpecInputType


class QuantSpecVerifyInput(SpecInput):
    """``spec_info`` of the TARGET_VERIFY forward: a chain of ``draft_token_num`` tokens per request, causal inside the
    window, no custom mask. ``positions`` are absolute (``seq_lens[b] + j``); ``forward_batch.seq_lens`` stays the
    committed length (window excluded), as for SGLang's other verify inputs."""

    def __init__(self, draft_token: torch.Tensor, positions: torch.Tensor, draft_token_num: int):
        # NGRAM_VERIFY is the neutral verify type: chain/tree mask verify, no draft hidden states.
        super().__init__(SpecInputType.NGRAM_VERIFY)
        self.draft_token = draft_token
        self.positions = positions
        self.draft_token_num = draft_token_num
        self.custom_mask = None
        self.capture_hidden_mode = CaptureHiddenMode.NULL
        self.num_tokens_per_req = draft_token_num
        self.num_tokens_for_logprob_per_req = draft_token_num


class QuantSpecDraftStep(SpecInput):
    """``spec_info`` of a draft DECODE forward. Its only job: ``num_tokens_per_req = 1`` differs from the width
    (γ+1) SGLang's decode CUDA graphs are captured with under speculation, so ``DecodeCudaGraphRunner.can_run_graph``
    refuses them (replaying the TARGET_VERIFY graph on a one-token batch would read stale rows of its static
    buffers); drafts replay their own graphs (sgl_spec/speculative/draft_graph.py) or run eagerly, in draft mode."""

    def __init__(self):
        super().__init__(SpecInputType.NGRAM_VERIFY)  # a neutral type: no hidden states, no tree
        self.positions = None  # positions come from seq_lens (DECODE)
        self.custom_mask = None
        self.capture_hidden_mode = CaptureHiddenMode.NULL
        self.num_tokens_per_req = 1
        self.num_tokens_for_logprob_per_req = 1


class QuantSpecDraftInput(SpecInput):
    """What the scheduler carries from one step to the next (``batch.spec_info``): the last emitted token of each
    request (``bonus_tokens``), which the next window starts from.

    Under SGLang's overlap scheduler the next batch is built before this one's results reach the host, so the tokens
    travel through the scheduler's ``FutureMap`` instead (the same relay EAGLE's draft input uses): the scheduler
    stashes ``bonus_tokens`` by request slot, sets ``future_indices``, filters/merges only those, and gathers fresh
    ``bonus_tokens`` right before the next forward. Without overlap the tensors themselves are filtered/merged.
    The fields SGLang's relay reads and quantspec has no use for (``topk_p``, ``hidden_states``, …) stay None."""

    def __init__(self, bonus_tokens: torch.Tensor, draft_token_num: int):
        super().__init__(SpecInputType.NGRAM_VERIFY)
        self.bonus_tokens = bonus_tokens
        self.draft_token_num = draft_token_num
        self.num_tokens_per_req = draft_token_num
        self.num_tokens_for_logprob_per_req = draft_token_num
        self.future_indices = None
        self.future_dsa_topk_indices_available = False
        self.topk_p = self.topk_index = self.hidden_states = self.draft_probs = self.dsa_topk_indices = None

    def filter_batch(self, new_indices: torch.Tensor, new_indices_cpu=None):
        if self.future_indices is not None:  # overlap: the tokens are gathered from the FutureMap before the forward
            self.future_indices = self.future_indices[new_indices]
            self.bonus_tokens = None
            return
        self.bonus_tokens = self.bonus_tokens[new_indices]

    def merge_batch(self, other: "QuantSpecDraftInput"):
        if self.future_indices is not None:
            assert other.future_indices is not None, "merging an overlap-scheduled batch with a non-overlap one"
            self.future_indices = torch.cat([self.future_indices, other.future_indices])
            self.bonus_tokens = None
            return
        self.bonus_tokens = torch.cat([self.bonus_tokens, other.bonus_tokens])
