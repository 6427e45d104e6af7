"""bench/kernel_timing.py's L2 flushes on the CPU (the timing itself needs CUDA events: GPU only): the modes do what they
say to the 256 MB buffer, and an unknown mode is refused with the choices."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from kernel_timing import FLUSH_BYTES, FLUSH_MODES, L2Flush  # noqa: E402


def test_flush_modes():
    assert FLUSH_MODES == ("read", "zero")
    read = L2Flush("read", device="cpu")
    assert read.buf.numel() * read.buf.element_size() == FLUSH_BYTES
    read()  # reads every element into one scalar, writes nothing else
    assert read.out.item() == 1 and bool((read.buf == 1).all())
    zero = L2Flush("zero", device="cpu")
    zero()
    assert not bool(zero.buf.any())


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="use one of read, zero"):
        L2Flush("clean", device="cpu")
