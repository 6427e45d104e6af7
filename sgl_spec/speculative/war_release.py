"""When SGLang's overlap scheduler may prepare the next decode batch while a speculative round still runs.

After each launch the overlap scheduler fences its next writes to shared buffers (the next batch's KV-slot
allocation into ``req_to_token``, …) behind the forward: its schedule stream waits for the read-done event the
forward published (the model runner's read-done event: ``READ_DONE_EVENT`` of sgl_spec/patches/) or, when there is none, for the *whole* forward
stream. The next batch's preparation then copies host lists to the device from pageable memory, and such a copy
synchronizes the host with the schedule stream (CUDA: a pageable H2D copy waits for its stream). With no event the
host therefore cannot start round N+1 before round N has finished on the GPU, and the GPU idles while the host
prepares it: an H200 trace of pycode-30m 15k x 32 showed the GPU idle from each round's result copy until the next
round's first draft kernel (the scheduler's allocation kernels and our round set-up arriving one by one).

A round publishes an event recorded right after its set-up (``record``), which lets the scheduler prepare the next
batch during the round's drafts and verify. What the next batch's preparation writes, and why that is safe for what
the round still reads afterwards:

* ``req_to_token``: the spec-v2 decode allocation (``eagle_prepare_for_decode``) only appends slots beyond each
  running request's allocated length; the round reads positions below it (its window was allocated before it
  started). A row freed by a request that finished one round earlier may be reused by a new request; the round's
  reads of that row are garbage, but so are that request's outputs, which the scheduler drops (as for SGLang's own
  spec-v2 workers), and whatever the round writes through it (ring, quantized page) lies in pages the new owner's
  own forwards overwrite before they read them (KV writes stay ordered on the forward stream).
* the batch's own tensors (``seq_lens``, ``req_pool_indices``, sampling filters) are replaced, not written in place,
  when the next batch is built, and the scheduler keeps the old batch alive until its result is processed.
* penalty accumulators *are* updated in place (``cumulate_penalty_output_tokens``), and grammar, logprob and custom
  logit-processor state is host state of the next step: batches with any of them keep the whole-forward barrier.

Only on CUDA (the scheduler applies the barrier there; CPU runs the non-overlap scheduler). The backend also tells
the scheduler it needs no host copy of the committed lengths (``needs_cpu_seq_lens = False``): otherwise starting a
round waits on the host for the previous round's published lengths, which serializes the rounds just the same.
"""
from __future__ import annotations

from typing import Optional

import torch

from sgl_spec.patches import sglang


def overlap_safe(batch) -> bool:
    """Whether nothing the round reads after its set-up is changed in place by the next batch's preparation."""
    if getattr(batch, "has_grammar", False) or getattr(batch, "return_logprob", False):
        return False
    si = getattr(batch, "sampling_info", None)
    if si is None:
        return True
    if getattr(si, "acc_additive_penalties", None) is not None or getattr(si, "acc_scaling_penalties", None) is not None:
        return False
    if getattr(si, "has_custom_logit_processor", False):
        return False
    orch = getattr(si, "penalizer_orchestrator", None)
    return not (orch is not None and getattr(orch, "is_required", False))


def record(batch, device: torch.device) -> Optional["torch.cuda.Event"]:
    """An event on the current stream marking the end of the round's set-up, or None (keep the whole-forward
    barrier: not CUDA, or the batch is not ``overlap_safe``)."""
    if torch.device(device).type != "cuda" or not overlap_safe(batch):
        return None
    ev = torch.cuda.Event()
    ev.record()
    return ev


def publish(model_runner, event) -> None:
    """Hand ``event`` to the scheduler's WAR barrier (it reads and clears the attribute right after the launch).
    None clears it: a graph replay inside the round may have published its own mid-forward event (SGLang 0.5.23's
    verify replay does), which must not stand for the round; the scheduler then waits for the whole forward."""
    setattr(model_runner, sglang().READ_DONE_EVENT, event)


def read_done_runner(worker):
    """The model runner whose read-done event the scheduler's barrier takes after the launch."""
    return getattr(worker, sglang().READ_DONE_RUNNER)
