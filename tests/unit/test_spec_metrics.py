"""SGLang's speculative metrics for quantspec (sgl_spec/speculative/spec_metrics.py) against SGLang's own counting:
its metrics reporter's ``update_spec_metrics`` (the installed release's, called as the scheduler calls it after a
decode round) on a stand-in reporter, and its load-snapshot types. The live server checks are in
tests/server/test_api_surface.py (--enable-metrics) and tests/server/test_quantspec_server.py (without)."""
from __future__ import annotations

import importlib
import inspect
from types import SimpleNamespace

import pytest
from sglang.srt.managers.load_snapshot import LoadSnapshot, SpeculativeMetrics
from sglang.srt.managers.scheduler_components.metrics_reporter import SchedulerMetricsReporter
from sglang.srt.observability.metrics_collector import SchedulerStats
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

from sgl_spec import plugin
from sgl_spec.speculative import spec_metrics

GAMMA = 3
GAUGES = ("spec_accept_length", "spec_accept_rate", "spec_num_steps", "spec_num_draft_tokens")


class Collector:
    """The gauges' side of SGLang's SchedulerMetricsCollector: the last value set on each."""

    def __init__(self):
        for name in GAUGES:
            setattr(self, name, name)
        self.values = {}

    def _log_gauge(self, gauge, value):
        self.values[gauge] = value


def _quantspec():
    plugin._register_spec_algorithm()
    return SpeculativeAlgorithm.from_string("quantspec")


def _reporter(algorithm, metrics=True):
    return SimpleNamespace(
        scheduler=SimpleNamespace(spec_algorithm=algorithm), stats=SchedulerStats(), metrics_collector=Collector(),
        current_scheduler_metrics_enabled=metrics, num_generated_tokens=0, spec_num_accept_tokens=0,
        spec_num_correct_drafts=0, spec_num_forward_ct=0, spec_total_num_accept_tokens=0,
        spec_total_num_forward_ct=0, spec_num_block_accept_tokens=0, spec_num_cap_tokens=0)


def _round(reporter, bs, accepted):
    """One decode round of ``bs`` requests with ``accepted`` accepted drafts, counted by SGLang's reporter method
    (0.5.23's scheduler also passes the round's output tokens: the accepted drafts + one a request), then the hook."""
    kwargs = {}
    if "num_accept_tokens" in inspect.signature(SchedulerMetricsReporter.update_spec_metrics).parameters:
        kwargs["num_accept_tokens"] = accepted + bs
    result = SchedulerMetricsReporter.update_spec_metrics(reporter, bs, accepted, **kwargs)
    return spec_metrics.on_round(result, reporter)


def _log_line(reporter):
    """What SGLang's decode-batch log line does to the counters (report_decode_stats): the interval into the
    lifetime totals, then a new interval."""
    reporter.spec_total_num_accept_tokens += reporter.spec_num_accept_tokens
    reporter.spec_total_num_forward_ct += reporter.spec_num_forward_ct
    reporter.spec_num_accept_tokens = reporter.spec_num_correct_drafts = reporter.spec_num_forward_ct = 0


def _loads(algorithm):
    return spec_metrics.on_loads(LoadSnapshot(), SimpleNamespace(spec_algorithm=algorithm))


@pytest.fixture(autouse=True)
def _gamma(monkeypatch):
    """γ as SGLang's runtime context gives it in a scheduler process; and no reporter seen yet."""
    monkeypatch.setattr(spec_metrics, "draft_tokens_per_round", lambda: GAMMA)
    monkeypatch.setattr(spec_metrics, "_reporter", None)


def test_rates_are_sglangs_definitions():
    # 4 request-rounds, 6 accepted drafts of 4·3 proposed, 6 + 4 tokens
    length, rate = spec_metrics.rates(10, 4, GAMMA)
    assert (length, rate) == (2.5, 0.5) and length == 1 + GAMMA * rate
    assert spec_metrics.rates(0, 0, GAMMA) is None
    assert spec_metrics.rates(3, 3, 0) == (1.0, 0.0)  # no drafts proposed: rate 0, as SGLang's log line has it


def test_every_round_sets_the_values_of_the_interval_the_next_log_line_reports():
    rep = _reporter(_quantspec())
    _round(rep, 2, 5)
    _round(rep, 1, 3)
    # 3 request-rounds, 8 of 9 drafts accepted, 11 tokens
    assert (rep.stats.spec_accept_length, rep.stats.spec_accept_rate) == pytest.approx((11 / 3, 8 / 9))
    assert (rep.stats.spec_num_steps, rep.stats.spec_num_draft_tokens) == (GAMMA, GAMMA + 1)
    assert rep.metrics_collector.values == pytest.approx(
        {"spec_accept_length": 11 / 3, "spec_accept_rate": 8 / 9, "spec_num_steps": GAMMA,
         "spec_num_draft_tokens": GAMMA + 1})
    assert rep.spec_num_correct_drafts in (0, 8)  # 0.5.23 counts the accepted drafts apart: the same 8
    _log_line(rep)
    _round(rep, 1, 0)  # a new interval: one round, nothing accepted (or an auto-off plain step)
    assert (rep.stats.spec_accept_length, rep.stats.spec_accept_rate) == (1.0, 0.0)
    assert rep.metrics_collector.values["spec_accept_rate"] == 0.0


def test_loads_report_the_lifetime_from_one_set_of_counts():
    q = _quantspec()
    assert _loads(q).speculative is None  # no round yet: SGLang's snapshot as it is
    rep = _reporter(q, metrics=False)
    _round(rep, 2, 5)
    _round(rep, 1, 3)
    _log_line(rep)
    _round(rep, 1, 0)
    spec = _loads(q).speculative
    # lifetime: 4 request-rounds, 8 of 12 drafts accepted, 12 tokens (SGLang's totals + the open interval)
    assert isinstance(spec, SpeculativeMetrics)
    assert (spec.accept_length, spec.accept_rate) == pytest.approx((3.0, 8 / 12))
    assert rep.metrics_collector.values == {}  # no --enable-metrics: no gauge is set


def test_other_algorithms_keep_sglangs_metrics():
    rep = _reporter(SpeculativeAlgorithm.EAGLE)
    _round(rep, 2, 5)
    assert (rep.stats.spec_accept_length, rep.stats.spec_accept_rate) == (0.0, 0.0)
    assert rep.metrics_collector.values == {}
    _round(_reporter(_quantspec()), 2, 5)  # a quantspec reporter seen: an EAGLE snapshot still stays SGLang's
    assert _loads(SpeculativeAlgorithm.EAGLE).speculative is None


@pytest.mark.parametrize("target", [spec_metrics.ROUND_TARGET, spec_metrics.LOADS_TARGET])
def test_hooked_methods_exist_in_the_installed_sglang(target):
    module, cls, method = target.rsplit(".", 2)
    assert callable(getattr(getattr(importlib.import_module(module), cls), method))


def test_spec_algorithm_name_matches_the_registered_algorithm():
    assert spec_metrics.is_quantspec(_quantspec())
    assert not spec_metrics.is_quantspec(SpeculativeAlgorithm.EAGLE)
    assert not spec_metrics.is_quantspec(SpeculativeAlgorithm.NONE)
