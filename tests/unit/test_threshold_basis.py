"""The threshold's basis as pure functions: the time-weighted mean of a gauge, and closed loop's median.

Open loop's thresholds are set on the gauge's time average (or the client's requests in flight):
tests/unit/test_open_loop_thresholds.py. Closed loop's stay on the median, which is right there.
"""

from __future__ import annotations

import numpy as np
import pytest

from loadtest.analysis.server import SignalStats, time_weighted_mean
from loadtest.analysis.signals import Signal
from loadtest.analysis.thresholds import MIN_GAUGE_SCRAPES, PLACEHOLDER, signal_threshold, threshold_basis

RUNNING = "llamacpp:requests_processing"


def test_the_time_weighted_mean_weighs_each_scrape_by_the_time_nearest_it():
    wall, value = np.array([0.1, 0.0, 5.0]), np.array([0.0, 0.0, 10.0])  # any order; a late third scrape
    # the scrape at 5 stands for [2.55, 10): 7.45 s of 10; the plain mean would be 3.33
    assert time_weighted_mean(wall, value, 0.0, 10.0) == pytest.approx(7.45)
    steady = np.arange(0.5, 10.0, 1.0)
    assert time_weighted_mean(steady, steady, 0.0, 10.0) == pytest.approx(steady.mean())


def test_closed_loop_thresholds_stay_on_the_median_even_from_few_scrapes():
    """The users hold the count in flight: the gauge sits at it, and its median is the right value."""
    running = Signal(RUNNING, "llama.cpp", "running")
    cap = SignalStats(p50=6.0, p95=6.0, max=6.0, n=3, mean=5.5)
    basis = threshold_basis(running, cap, open_loop=False, client_in_flight=None)
    assert (basis.kind, basis.value) == ("p50", 6.0)
    value, why = signal_threshold(running, cap, None, 0.2, 6.0, basis)
    assert value == 4.8
    assert why == ("at capacity the server reports p50 6 (p95 6); scale out above 4.8 per replica, "
                   "20% below the value at capacity.")


def test_an_open_loop_basis_is_the_time_mean_from_enough_scrapes_else_the_client_else_none():
    running = Signal(RUNNING, "llama.cpp", "running")
    nobody_waits = SignalStats(p50=0.0, p95=0.0, max=0.0, n=3, mean=0.0)
    many = SignalStats(p50=1.0, p95=4.0, max=4.0, n=MIN_GAUGE_SCRAPES, mean=1.7)
    few = SignalStats(p50=1.0, p95=2.8, max=3.0, n=3, mean=1.3)
    assert threshold_basis(running, many, True, 3.1, nobody_waits).kind == "time_mean"
    basis = threshold_basis(running, few, True, 3.085, nobody_waits)
    assert (basis.kind, basis.value) == ("client_in_flight", 3.085)
    assert signal_threshold(running, few, None, 0.2, 1.0, basis)[0] == 2.47  # the trial's openref1: 0.8 before
    assert threshold_basis(running, few, True, None, nobody_waits).value is None  # no client count (closed loop's)
    assert threshold_basis(running, few, True, 3.1, None).value is None  # no waiting gauge: cannot tell
    value, why = signal_threshold(running, few, None, 0.2, 1.0, threshold_basis(running, few, True, None, nobody_waits))
    assert value is None and PLACEHOLDER in why and "2.8" in why  # the scrapes are said, no threshold is made of them
