"""``VerifyLaunch``: a frozen launch geometry for ``verify_attention(launch=...)``, for tests and benchmarks that
time or check one geometry. ``None`` (the server's call) means the rules: ``splits.py`` picks the split count,
``triton.block_rows`` the row tile."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VerifyLaunch:
    """``num_splits``: page splits a request (every request the same count, the smallest split size; the ring then
    stays a Triton launch). ``block_m``: rows a Triton program (a power of two >= max(16, 2G))."""
    num_splits: int | None = None
    block_m: int | None = None
