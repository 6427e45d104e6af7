"""Programmatic dependent launch (PDL, sm_90 and later) for the kernels a forward runs once per layer.

Inside a CUDA graph a draft pass of pycode-30m is ~85 kernels of 1-13 us, and the gaps between them are ~13% of the
pass (H200, 15k x 32: 48 of 358 us) without PDL. A kernel launched with the PDL
attribute may be scheduled before the kernel ahead of it in the stream has finished; its first instruction,
``griddepcontrol.wait`` (``_wait_prior``), then blocks until that kernel has completed and its memory is visible.
So nothing a PDL kernel reads or writes can race with its predecessor; what overlaps is its launch (the gap).
``griddepcontrol.wait`` is a no-op for a kernel launched without the attribute.
"""
from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

ENABLED = True  # launch with PDL where the device supports it (sm_90+); False: plain launches


@triton.jit
def _wait_prior(PDL: tl.constexpr):
    """The kernel's first statement: with PDL, wait until the previous kernel in the stream is done."""
    if PDL:
        gdc_wait()


@triton.jit
def _release_dependents(ON: tl.constexpr):
    """With ON, let the next PDL launch in the stream start now rather than when this kernel ends: only for a next
    kernel that reads nothing this one writes and waits for it before it ends (draft_decode's hot-token launch and
    the Gluon page launch after it, whose merge needs both)."""
    if ON:
        gdc_launch_dependents()


@functools.lru_cache(maxsize=None)
def _supported(index: int) -> bool:
    return torch.cuda.get_device_capability(index)[0] >= 9


def pdl_kwargs(device: torch.device) -> dict:
    """Launch keywords: ``PDL`` (the kernels' constexpr) and Triton's ``launch_pdl`` option."""
    on = (ENABLED and device.type == "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1"
          and _supported(device.index if device.index is not None else torch.cuda.current_device()))
    return {"PDL": True, "launch_pdl": True} if on else {"PDL": False}
