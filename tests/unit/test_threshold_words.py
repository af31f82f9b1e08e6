"""The scale-out thresholds' sentences say what the threshold cell shows, and why it is that value."""

from __future__ import annotations

from loadtest.analysis.autoscaling import _threshold
from loadtest.analysis.thresholds import fmt_signal
from loadtest.analysis.server import SignalStats
from loadtest.analysis.signals import Signal


def test_a_fraction_reads_the_same_in_the_sentence_and_the_cell():
    """The KV cache's threshold cell read 2.3% (one decimal) and its sentence "above 2%" (none)."""
    kv = Signal("vllm:kv_cache_usage_perc", "vLLM", "kv_cache")
    value, why = _threshold(kv, SignalStats(p50=0.029, p95=0.031, max=0.031, n=20), None, 0.2, 0.02)
    assert value == 0.023
    assert f"scale out above {fmt_signal(value, True)} per replica" in why and fmt_signal(value, True) == "2.3%"


def test_a_waiting_threshold_floored_at_one_does_not_claim_the_headroom():
    """p50 0.5 waiting at capacity: 20% below is 0.4, so the trigger is floored at 1 request, which
    the sentence once called "(20% below)"."""
    waiting = Signal("vllm:num_requests_waiting", "vLLM", "waiting")
    value, why = _threshold(waiting, SignalStats(p50=0.5, p95=2.0, max=3.0, n=20), None, 0.2, 0.5)
    assert value == 1.0
    assert "(20% below)" not in why and "20% below the median would be 0.4" in why
    value, why = _threshold(waiting, SignalStats(p50=5.0, p95=6.0, max=7.0, n=20), None, 0.2, 5.0)
    assert value == 4.0 and "scale out above 4 waiting per replica (20% below)" in why


def test_a_signal_at_zero_at_capacity_gives_no_threshold_that_fires_on_any_traffic():
    """A profile's one-user sub-run behind a balancer read running p50 0 per replica at its only level and
    printed "Scale out when vllm:num_requests_running > 0 per replica": a trigger that fires on any traffic."""
    running = Signal("vllm:num_requests_running", "vLLM", "running")
    value, why = _threshold(running, SignalStats(p50=0.0, p95=1.0, max=1.0, n=12), None, 0.2, 0.0)
    assert value is None and "fires on any traffic" in why
    kv = Signal("vllm:kv_cache_usage_perc", "vLLM", "kv_cache")
    assert _threshold(kv, SignalStats(p50=0.0, p95=0.0, max=0.0, n=12), None, 0.2, 0.0)[0] is None
    value, _ = _threshold(running, SignalStats(p50=1.0, p95=1.0, max=1.0, n=12), None, 0.2, 1.0)
    assert value == 0.8  # one request at capacity still sets its threshold


def test_a_signal_measured_at_zero_is_no_placeholder_to_fill_in():
    # two merged rules met: a threshold of 0 is none, and a missing threshold read as "too few scrapes,
    # fill in <THRESHOLD>" though 12 scrapes had measured it (a review); more scrapes would not help
    from loadtest.analysis.autoscaling import SignalRecommendation

    zero = SignalStats(p50=0.0, p95=0.0, max=0.0, n=12, mean=0.0)
    measured = SignalRecommendation("vllm:num_requests_running", "vllm", "running", zero, None, None, "", False, 0.0,
                                    "time_mean", 0.0)
    unmeasured = SignalRecommendation("vllm:num_requests_running", "vllm", "running", zero, None, None, "", False, 0.0,
                                      None, None)
    assert not measured.placeholder and unmeasured.placeholder
