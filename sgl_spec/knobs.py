"""The environment knobs: for debugging and benchmarking only; a server's behaviour comes from its flags (flags.py).

Every knob is ``SGL_SPEC_<NAME>``, listed in ``KNOBS`` with what it does, and read through ``get``. SGLang 0.5.23
copies every ``SGL_*`` variable to ``SGLANG_*`` when it starts and warns that the ``SGL_`` spelling is deprecated, so
``get`` also takes ``SGLANG_SPEC_<NAME>``: a user who follows SGLang's warning keeps the knob. ``warn_set`` logs,
once per process, every knob that is set: none of them belongs in a serving deployment.
"""
from __future__ import annotations

import logging
import os
from typing import Optional

logger = logging.getLogger(__name__)

PREFIX = "SGL_SPEC_"
SGLANG_PREFIX = "SGLANG_SPEC_"  # SGLang 0.5.23's rewrite of PREFIX

# name (without the prefix) -> (kind, what it does)
KNOBS = {
    "FORCE_REF": ("debugging", "1: the pure-torch reference of every kernel, also on CUDA tensors"),
    "PREFILL": ("benchmarking", "fa3 | fa3_segments | triton | torch: forces the EXTEND attention's engine"),
    "W4A16": ("benchmarking", "marlin | triton | torch: forces the 4-bit draft weights' GEMM"),
    "SIMULATE_ACCEPT": ("benchmarking", "α in (0, 1]: each greedy draft the target accepts is kept with probability α "
                                        "(acceptance and speed simulated; the output is still the target's)"),
    "AUTO_LOG": ("debugging", "N: auto-off logs its state every N decisions (default 4096)"),
    "DRAFT_GRAPHS": ("debugging", "off | eager: draft passes without CUDA graphs, or through an eager stand-in"),
    "TIMING": ("debugging", "N: where a round's time goes, one summary line every N rounds"),
    "PROFILE": ("debugging", "SKIP:N: a torch profiler trace over rounds SKIP … SKIP+N-1"),
}

_warned = False


def name(knob: str) -> str:
    """The documented variable of ``knob`` (e.g. "TIMING" -> "SGL_SPEC_TIMING")."""
    if knob not in KNOBS:
        raise KeyError(f"{knob!r} is not one of sgl_spec's environment knobs ({', '.join(KNOBS)})")
    return PREFIX + knob


def get(knob: str, default: str = "") -> str:
    """The value of ``SGL_SPEC_<knob>`` (else ``SGLANG_SPEC_<knob>``, else ``default``), stripped."""
    var = name(knob)
    raw = os.environ.get(var)
    if raw is None:
        raw = os.environ.get(SGLANG_PREFIX + knob)
    return default if raw is None or not raw.strip() else raw.strip()


def _suffix(var: str) -> Optional[str]:
    """The knob part of an environment variable with either prefix, else None."""
    for prefix in (PREFIX, SGLANG_PREFIX):
        if var.startswith(prefix):
            return var[len(prefix):]
    return None


def unknown() -> list[str]:
    """Variables that look like knobs (either prefix) but are none of ``KNOBS``: a typo that would do nothing. The
    tests' own ``SGL_SPEC_TEST_*`` variables are not knobs of the package."""
    return sorted(var for var in os.environ
                  if (k := _suffix(var)) is not None and k not in KNOBS and not k.startswith("TEST_"))


def warn_set(log: Optional[logging.Logger] = None) -> None:
    """Once per process: one warning naming every knob that is set (and any unknown SGL_SPEC_ variable)."""
    global _warned
    if _warned:
        return
    _warned = True
    log = log or logger
    on = {k: get(k) for k in KNOBS}
    if any(on.values()):
        log.warning("quantspec: environment knobs set (debugging / benchmarking only, not for serving): %s",
                    "; ".join(f"{name(k)}={val} ({KNOBS[k][0]}: {KNOBS[k][1]})" for k, val in on.items() if val))
    bad = unknown()
    if bad:
        log.warning("quantspec: no such environment knob: %s (the knobs: %s)", ", ".join(bad),
                    ", ".join(PREFIX + k for k in KNOBS))
