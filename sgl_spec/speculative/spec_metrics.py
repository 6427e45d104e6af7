"""SGLang's speculative-decoding metrics for ``--spec-algo quantspec``, current after every round: the
``speculative`` block of ``/v1/loads`` and, with ``--enable-metrics``, the ``sglang:spec_accept_length`` /
``sglang:spec_accept_rate`` / ``sglang:spec_num_steps`` / ``sglang:spec_num_draft_tokens`` gauges.

What SGLang does by itself (its scheduler's metrics reporter, the same in 0.5.17 and 0.5.23): every decode round adds
the round's counts to interval counters (``update_spec_metrics``: request-rounds, and accept tokens = accepted drafts
+ one non-draft token per request-round). Only when it writes a decode-batch log line (every
``--decode-log-interval`` rounds) does it fold the interval into its lifetime totals and, with ``--enable-metrics``
only, store the interval's accept length and rate in its stats. ``/v1/loads`` takes its accept length from the
lifetime totals and its accept rate from those stats, and the gauges are set from the stats. So ``/v1/loads`` has
no speculative block until the first log line and, without ``--enable-metrics``, an accept rate of 0.0 after it;
with ``--enable-metrics`` the gauges read 0.0 until the first log line.

The definitions are SGLang's (its log line and the per-request ``spec_accept_rate`` of meta_info): a round of ``bs``
requests proposes ``bs·γ`` drafts (γ = ``speculative_num_draft_tokens`` − 1); accept length = accept tokens /
request-rounds, accept rate = accepted drafts / proposed drafts, so accept length = 1 + γ·accept rate. A plain step
of ``--quantspec-speculate auto`` / ``never`` counts as a round that proposed γ drafts and had none accepted, as
SGLang's per-request counts take it.

For quantspec (other algorithms keep SGLang's behaviour):
* after each round (``on_round``): the stats, and with ``--enable-metrics`` the gauges, hold the values of the
  rounds since the last log line, which are the values that log line sets;
* ``/v1/loads`` (``on_loads``): accept length and rate over the server's lifetime, both from the same counts
  (SGLang's totals + the rounds since the last log line).
"""
from __future__ import annotations

from typing import Optional

from sgl_spec.config import ALGO_NAME

# What sgl_spec/plugin.py hooks (AFTER) with on_round and on_loads.
_COMPONENTS = "sglang.srt.managers.scheduler_components"
ROUND_TARGET = f"{_COMPONENTS}.metrics_reporter.SchedulerMetricsReporter.update_spec_metrics"
LOADS_TARGET = f"{_COMPONENTS}.load_inquirer.SchedulerLoadInquirer.get_loads"
# The metrics reporter of this scheduler process (one reporter a scheduler process), recorded by its first round:
# the load inquirer that answers /v1/loads holds no reference to it.
_reporter = None


def is_quantspec(spec_algorithm) -> bool:
    return getattr(spec_algorithm, "name", None) == ALGO_NAME


def draft_tokens_per_round() -> int:
    """γ as SGLang's decode log line takes it."""
    from sglang.srt.runtime_context import get_spec

    spec = get_spec()
    if spec.speculative_num_draft_tokens:
        return spec.speculative_num_draft_tokens - 1
    return spec.speculative_num_steps or 0


def rates(accept_tokens: int, request_rounds: int, gamma: int) -> Optional[tuple[float, float]]:
    """(accept length, accept rate) of ``request_rounds`` request-rounds that produced ``accept_tokens`` tokens
    (accepted drafts + one non-draft token each); None without a round."""
    if request_rounds <= 0:
        return None
    accepted = accept_tokens - request_rounds
    proposed = request_rounds * gamma
    return accept_tokens / request_rounds, (accepted / proposed if proposed > 0 else 0.0)


def lifetime(reporter) -> tuple[int, int]:
    """(accept tokens, request-rounds) since the server started (or its metrics were reset)."""
    return (reporter.spec_total_num_accept_tokens + reporter.spec_num_accept_tokens,
            reporter.spec_total_num_forward_ct + reporter.spec_num_forward_ct)


def on_round(result, reporter, *args, **kwargs):
    """After ``update_spec_metrics`` (a decode round's counts are in): the interval's values into the stats and
    the gauges."""
    global _reporter
    if not is_quantspec(reporter.scheduler.spec_algorithm):
        return result
    _reporter = reporter
    gamma = draft_tokens_per_round()
    interval = rates(reporter.spec_num_accept_tokens, reporter.spec_num_forward_ct, gamma)
    if interval is None:
        return result
    stats = reporter.stats
    stats.spec_accept_length, stats.spec_accept_rate = interval
    stats.spec_num_steps, stats.spec_num_draft_tokens = gamma, gamma + 1
    collector = reporter.metrics_collector
    if reporter.current_scheduler_metrics_enabled and collector is not None:
        collector._log_gauge(collector.spec_accept_length, stats.spec_accept_length)
        collector._log_gauge(collector.spec_accept_rate, stats.spec_accept_rate)
        collector._log_gauge(collector.spec_num_steps, stats.spec_num_steps)
        collector._log_gauge(collector.spec_num_draft_tokens, stats.spec_num_draft_tokens)
    return result


def on_loads(snapshot, inquirer, *args, **kwargs):
    """After the load inquirer built a /v1/loads snapshot: its speculative block over the lifetime counts."""
    if _reporter is None or not is_quantspec(inquirer.spec_algorithm):
        return snapshot
    values = rates(*lifetime(_reporter), draft_tokens_per_round())
    if values is not None:
        from sglang.srt.managers.load_snapshot import SpeculativeMetrics

        snapshot.speculative = SpeculativeMetrics(accept_length=values[0], accept_rate=values[1])
    return snapshot
