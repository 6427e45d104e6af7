"""Where a speculative round's time goes (debugging only: ``SGL_SPEC_TIMING=N`` logs a summary every N rounds).

Per round the worker marks phase boundaries (``mark("draft")`` when the drafts are enqueued, …). Each mark takes a
host timestamp and, on CUDA, records an event on the current stream; nothing waits for the GPU. The events of a
round are read on the *next* round's start: the scheduler has synchronized on the round's results by then, so
``elapsed_time`` does not block; a round whose events have not all completed yet (the overlap scheduler lets the host
start the next round early: war_release.py) stays pending until they have. The log line gives, per phase, the host time spent enqueuing it and the GPU time
between its events, plus the host time outside the worker (scheduler, detokenizer hand-off, …) between rounds:

    quantspec timing: 200 rounds, bs 64.0 | host ms draft 0.41 verify 0.35 accept 0.20 outside 0.95 |
    gpu ms draft 1.02 verify 2.10 accept 0.12 | round wall ms 3.90
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Optional

import torch

from sgl_spec import knobs

logger = logging.getLogger(__name__)

ENV = knobs.name("TIMING")


def from_env(device) -> Optional["PhaseTimer"]:
    raw = knobs.get("TIMING")
    if not raw:
        return None
    try:
        every = int(raw)
    except ValueError:
        raise ValueError(f"{ENV} must be a number of rounds between log lines, got {raw!r}") from None
    return PhaseTimer(every, str(device).startswith("cuda")) if every > 0 else None


class PhaseTimer:
    def __init__(self, every: int, cuda: bool):
        self.every = every
        self.cuda = cuda
        self._host = defaultdict(float)
        self._gpu = defaultdict(float)
        self._rounds = 0
        self._intervals = 0  # round starts with a previous round end (outside / wall are per interval)
        self._gpu_rounds = 0
        self._bs = 0
        self._pending = []  # earlier rounds' [(name, event)] lists, read once their last event has completed
        self._marks = []
        self._t_last = None
        self._t_end_prev = None
        self._t_start = None

    def start(self, bs: int) -> None:
        now = time.perf_counter()
        if self._t_end_prev is not None:
            self._host["outside"] += now - self._t_end_prev
            self._host["round wall"] += now - self._t_start
            self._intervals += 1
        self._read_pending()
        self._t_start = self._t_last = now
        self._bs += bs
        self._marks = [("start", self._event())]

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self._host[name] += now - self._t_last
        self._t_last = now
        self._marks.append((name, self._event()))

    def end(self) -> None:
        self._t_end_prev = time.perf_counter()
        self._pending.append(self._marks)
        self._marks = []
        self._rounds += 1
        if self._rounds % self.every == 0:
            self._log()

    def _event(self):
        if not self.cuda:
            return None
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def _read_pending(self) -> None:
        if not self.cuda:
            self._pending = []
            return
        while self._pending and self._pending[0][-1][1].query():
            marks = self._pending.pop(0)
            for (_, a), (name, b) in zip(marks, marks[1:]):
                self._gpu[name] += a.elapsed_time(b) * 1e-3
            self._gpu_rounds += 1

    def _log(self) -> None:
        n, ni, ng = self._rounds, max(self._intervals, 1), max(self._gpu_rounds, 1)
        host = " ".join(f"{k} {v / (ni if k == 'outside' else n) * 1e3:.2f}"
                        for k, v in self._host.items() if k != "round wall")
        gpu = " ".join(f"{k} {v / ng * 1e3:.2f}" for k, v in self._gpu.items())
        wall = self._host.get("round wall", 0.0) / ni * 1e3
        logger.info("quantspec timing: %d rounds, bs %.1f | host ms %s | gpu ms %s | round wall ms %.2f",
                    n, self._bs / n, host, gpu or "-", wall)
        self._host.clear()
        self._gpu.clear()
        self._rounds = self._intervals = self._gpu_rounds = self._bs = 0
        self._t_end_prev = None


PROFILE_ENV = knobs.name("PROFILE")


class RoundProfiler:
    """``SGL_SPEC_PROFILE=SKIP:N`` (debugging): a torch profiler over speculative rounds SKIP … SKIP+N-1 (the
    scheduler's work between them included); logs the kernels and ops by total device time once they are done."""

    def __init__(self, skip: int, rounds: int):
        self.skip, self.rounds = skip, rounds
        self._n = 0
        self._prof = None

    @classmethod
    def from_env(cls) -> Optional["RoundProfiler"]:
        raw = knobs.get("PROFILE")
        if not raw:
            return None
        try:
            skip, n = (int(x) for x in raw.split(":"))
        except ValueError:
            raise ValueError(f"{PROFILE_ENV} must be SKIP:ROUNDS, got {raw!r}") from None
        return cls(skip, n)

    def round(self) -> None:
        """Called at the start of every speculative round."""
        if self._n == self.skip:
            acts = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            self._prof = torch.profiler.profile(activities=acts)
            self._prof.__enter__()
        elif self._n == self.skip + self.rounds and self._prof is not None:
            self._prof.__exit__(None, None, None)
            key = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
            table = self._prof.key_averages().table(sort_by=key, row_limit=40, max_name_column_width=70)
            logger.info("quantspec profile of %d rounds:\n%s", self.rounds, table)
            self._prof = None
        self._n += 1
