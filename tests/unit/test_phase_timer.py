"""sgl_spec/speculative/phase_timer.py (SGL_SPEC_TIMING, debugging): per-phase host times and the time between rounds."""
import logging
import time

import pytest

from sgl_spec.speculative import phase_timer


def test_knob_parsing(monkeypatch):
    monkeypatch.delenv(phase_timer.ENV, raising=False)
    assert phase_timer.from_env("cpu") is None
    monkeypatch.setenv(phase_timer.ENV, "0")
    assert phase_timer.from_env("cpu") is None
    monkeypatch.setenv(phase_timer.ENV, "7")
    t = phase_timer.from_env("cpu")
    assert t.every == 7 and not t.cuda
    monkeypatch.setenv(phase_timer.ENV, "yes")
    with pytest.raises(ValueError, match="number of rounds"):
        phase_timer.from_env("cpu")


def test_log_line_has_each_phase_and_the_outside_time(caplog):
    t = phase_timer.PhaseTimer(every=3, cuda=False)
    with caplog.at_level(logging.INFO, logger=phase_timer.__name__):
        for _ in range(3):
            t.start(bs=4)
            time.sleep(0.004)
            t.mark("draft")
            time.sleep(0.002)
            t.mark("verify")
            t.end()
            time.sleep(0.003)  # the scheduler's share
    lines = [r.getMessage() for r in caplog.records if "quantspec timing" in r.getMessage()]
    assert len(lines) == 1
    line = lines[0]
    assert "3 rounds, bs 4.0" in line and "gpu ms -" in line
    vals = dict(zip(line.split("host ms ")[1].split(" |")[0].split()[::2],
                    map(float, line.split("host ms ")[1].split(" |")[0].split()[1::2])))
    assert vals["draft"] >= 4.0 and vals["verify"] >= 2.0 and vals["outside"] >= 3.0
    assert float(line.rsplit("round wall ms ", 1)[1]) >= 9.0


def test_round_profiler_logs_a_table_once(monkeypatch, caplog):
    import torch

    monkeypatch.setenv(phase_timer.PROFILE_ENV, "1:2")
    prof = phase_timer.RoundProfiler.from_env()
    with caplog.at_level(logging.INFO, logger=phase_timer.__name__):
        for _ in range(5):
            prof.round()
            torch.ones(64, 64) @ torch.ones(64, 64)
    tables = [r.getMessage() for r in caplog.records if "quantspec profile of 2 rounds" in r.getMessage()]
    assert len(tables) == 1 and "aten::mm" in tables[0]
    monkeypatch.setenv(phase_timer.PROFILE_ENV, "3")
    with pytest.raises(ValueError, match="SKIP:ROUNDS"):
        phase_timer.RoundProfiler.from_env()
