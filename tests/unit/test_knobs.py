"""sgl_spec/knobs.py: every environment variable the package reads is a listed, documented knob; both spellings
(SGL_SPEC_ and SGLang 0.5.23's rewrite SGLANG_SPEC_) are read; the startup warning names what is set."""
import logging
import re
from pathlib import Path

import pytest

from sgl_spec import knobs

ROOT = Path(__file__).resolve().parents[2]


def _clear(monkeypatch):
    import os

    for var in list(os.environ):
        if var.startswith((knobs.PREFIX, knobs.SGLANG_PREFIX)):
            monkeypatch.delenv(var)


def test_every_knob_the_package_names_is_listed():
    named = set()
    for f in (ROOT / "sgl_spec").rglob("*.py"):
        named |= set(re.findall(r"SGL_SPEC_([A-Z0-9_]+)", f.read_text()))
    named = {n.rstrip("_") for n in named if not n.startswith("TEST")} - {""}  # SGL_SPEC_TEST_*: the tests' own
    assert named <= set(knobs.KNOBS), f"named in sgl_spec/ but not in knobs.KNOBS: {sorted(named - set(knobs.KNOBS))}"


def test_every_knob_is_documented():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    missing = [knobs.name(k) for k in knobs.KNOBS if f"`{knobs.name(k)}" not in text]
    assert not missing, f"docs/ARCHITECTURE.md's knob table lacks {missing}"


def test_both_spellings_are_read(monkeypatch):
    _clear(monkeypatch)
    assert knobs.get("TIMING") == "" and knobs.get("AUTO_LOG", "4096") == "4096"
    monkeypatch.setenv("SGLANG_SPEC_TIMING", " 8 ")  # what a user who follows SGLang 0.5.23's warning sets
    assert knobs.get("TIMING") == "8"
    monkeypatch.setenv("SGL_SPEC_TIMING", "16")  # the documented spelling wins
    assert knobs.get("TIMING") == "16"
    monkeypatch.setenv("SGL_SPEC_AUTO_LOG", "  ")  # blank: unset
    assert knobs.get("AUTO_LOG", "4096") == "4096"
    with pytest.raises(KeyError, match="not one of"):
        knobs.get("TIMNG")


def test_the_readers_go_through_knobs(monkeypatch):
    from sgl_spec.speculative import accept, phase_timer

    _clear(monkeypatch)
    monkeypatch.setenv("SGLANG_SPEC_SIMULATE_ACCEPT", "0.9")
    assert accept.simulated_alpha() == pytest.approx(0.9)
    monkeypatch.setenv("SGLANG_SPEC_TIMING", "4")
    assert phase_timer.from_env("cpu").every == 4


def test_startup_warning_names_set_and_unknown_knobs(monkeypatch, caplog):
    _clear(monkeypatch)
    monkeypatch.setattr(knobs, "_warned", False)
    monkeypatch.setenv("SGL_SPEC_TIMING", "8")
    monkeypatch.setenv("SGLANG_SPEC_TIMING", "8")  # SGLang's copy: the same knob, named once
    monkeypatch.setenv("SGL_SPEC_TIMNIG", "8")
    monkeypatch.setenv("SGL_SPEC_TEST_DEVICE", "cuda")  # the tests' own variable: not a package knob
    with caplog.at_level(logging.WARNING, logger=knobs.__name__):
        knobs.warn_set()
        knobs.warn_set()  # once per process
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "SGL_SPEC_TIMING=8 (debugging" in lines[0] and lines[0].count("TIMING=") == 1
    assert "no such environment knob: SGL_SPEC_TIMNIG (" in lines[1] and "TEST_DEVICE" not in lines[1]


def test_nothing_set_nothing_logged(monkeypatch, caplog):
    _clear(monkeypatch)
    monkeypatch.setattr(knobs, "_warned", False)
    with caplog.at_level(logging.WARNING, logger=knobs.__name__):
        knobs.warn_set()
    assert not caplog.records
