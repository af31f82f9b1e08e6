"""Percentiles, order statistics and confidence intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.analysis.bootstrap import (
    bootstrap_quantile_ci,
    bootstrap_quantile_draws,
    rng_for,
    wilson_interval,
)
from loadtest.analysis.metrics import describe
from loadtest.quantiles import low_n, lower_unbounded, order_statistics, quantile_sorted


def test_percentiles_match_numpy_linear():
    values = np.arange(1.0, 101.0)  # 1..100
    assert quantile_sorted(values, 0.50) == pytest.approx(50.5)
    assert quantile_sorted(values, 0.95) == pytest.approx(95.05)
    assert quantile_sorted(values, 0.99) == pytest.approx(99.01)
    for q in (0.5, 0.9, 0.95, 0.99):
        assert quantile_sorted(values, q) == pytest.approx(np.percentile(values, q * 100))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1e5, allow_nan=False), min_size=1, max_size=300),
    st.sampled_from([0.5, 0.9, 0.95, 0.99]),
)
def test_percentiles_match_numpy_on_finite_data(values, q):
    arr = np.sort(np.array(values))
    assert quantile_sorted(arr, q) == pytest.approx(float(np.percentile(arr, q * 100)), rel=1e-9, abs=1e-9)


def test_failures_as_inf_push_the_percentile_up_without_nan():
    ok = np.full(96, 100.0)
    # 4 failures in 100: p95 still lands on a real value
    assert quantile_sorted(np.sort(np.concatenate([ok, np.full(4, np.inf)])), 0.95) == 100.0
    # 6 failures in 100: p95 falls on a failure -> +inf (never NaN)
    p95 = quantile_sorted(np.sort(np.concatenate([ok[:94], np.full(6, np.inf)])), 0.95)
    assert math.isinf(p95)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 2**31))
def test_order_statistics_equal_a_full_sort(n, seed):
    rng = np.random.default_rng(seed)
    values = rng.exponential(10, n)
    values[rng.random(n) < 0.02] = np.inf
    ranks = rng.integers(0, n, 50)
    np.testing.assert_array_equal(order_statistics(values, ranks, full_sort_below=0), np.sort(values)[ranks])


def test_order_statistics_large_sample_partial_sort():
    rng = np.random.default_rng(1)
    values = rng.exponential(20, 200_000)
    ranks = np.concatenate([rng.integers(98_000, 102_000, 500), rng.integers(197_000, 199_999, 500), [0, 199_999]])
    np.testing.assert_array_equal(order_statistics(values, ranks), np.sort(values)[ranks])


def test_exact_bootstrap_matches_brute_force_resampling():
    """The O(B) Beta-order-statistic bootstrap has the distribution of real resampling."""
    rng = np.random.default_rng(7)
    sample = np.sort(rng.lognormal(3, 0.5, 400))
    for q in (0.5, 0.95, 0.99):
        fast = bootstrap_quantile_draws(sample, q, np.random.default_rng(1), 20_000)
        idx = np.random.default_rng(2).integers(0, len(sample), (4000, len(sample)))
        brute = np.percentile(sample[idx], q * 100, axis=1)
        for tail in (2.5, 50, 97.5):
            assert np.percentile(fast, tail) == pytest.approx(np.percentile(brute, tail), rel=0.03)


def test_bootstrap_ci_brackets_the_estimate_and_narrows_with_n():
    rng = np.random.default_rng(3)
    small = np.sort(rng.exponential(20, 200))
    large = np.sort(rng.exponential(20, 20_000))
    lo_s, hi_s = bootstrap_quantile_ci(small, 0.95, rng_for(0, "s"))
    lo_l, hi_l = bootstrap_quantile_ci(large, 0.95, rng_for(0, "l"))
    assert lo_s <= quantile_sorted(small, 0.95) <= hi_s
    assert lo_l <= quantile_sorted(large, 0.95) <= hi_l
    assert (hi_l - lo_l) < (hi_s - lo_s)


def test_describe_is_seeded_and_reports_failures():
    values = np.concatenate([np.arange(1.0, 98.0), [np.inf] * 3])
    a = describe(values, rng_for(0, 1, "ttft_ms"))
    b = describe(values[::-1].copy(), rng_for(0, 1, "ttft_ms"))
    assert a == b  # order of input does not matter; same seed → same CIs
    assert a.n == 100 and a.n_failed == 3
    assert a.max == 97.0 and a.mean == pytest.approx(49.0)
    assert math.isinf(a.p99) and not math.isinf(a.p95)
    assert a.ci["p50"][0] <= a.p50 <= a.ci["p50"][1]


def test_low_n_thresholds():
    assert low_n(99, 0.99) and not low_n(100, 0.99)
    assert low_n(19, 0.95) and not low_n(20, 0.95)
    assert low_n(9, 0.90) and not low_n(10, 0.90)
    assert not low_n(2, 0.5)


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(0, 100)
    assert lo == 0.0 and hi == pytest.approx(0.0370, abs=1e-4)
    lo, hi = wilson_interval(10, 100)
    assert lo == pytest.approx(0.0552, abs=1e-4) and hi == pytest.approx(0.1744, abs=1e-4)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


@pytest.mark.parametrize("blocks", [False, True])
def test_a_median_over_its_limit_fails_only_from_enough_samples(blocks):
    """4 requests of a small class, all over a median's limit, were a certain failure (the
    bootstrap put the lower bound at the smallest of them) and bound the run's capacity. At 98.75%
    all 4 lie above a true median at the limit 1 time in 16: too few to fail. 8 are enough
    ((1/2)^8 = 0.4% < 0.625%)."""
    from loadtest.analysis.slo import SloCheck
    from loadtest.analysis.verdict import TOO_FEW, latency_check

    class Level:  # latency_check reads only the level's stats of the metric
        def __init__(self, stats):
            self.stats = stats

        def metric(self, name):
            return self.stats

    check = SloCheck("e2e_ms", "p50", 1500.0)
    for n, verdict in ((4, "uncertain"), (7, "uncertain"), (8, "fail"), (30, "fail")):
        values = np.linspace(1894.0, 1910.0, n)
        stats = describe(values, rng_for(0, n, "e2e_ms"), confidence=0.9875,
                         blocks=np.arange(n) if blocks else None)
        result = latency_check(Level(stats), check)
        assert result.verdict == verdict, (n, stats.ci["p50"])
        if verdict == "uncertain":
            assert stats.ci["p50"][0] == 0.0 and result.reason == TOO_FEW
        else:
            assert stats.ci["p50"][0] > 1500.0
    assert lower_unbounded(1, 0.95, 0.9875) and not lower_unbounded(2, 0.95, 0.9875)
    assert lower_unbounded(2, 0.9, 0.9875) and not lower_unbounded(3, 0.9, 0.9875)
    assert lower_unbounded(7, 0.5, 0.9875) and not lower_unbounded(8, 0.5, 0.9875)
    assert lower_unbounded(5, 0.5, 0.95) and not lower_unbounded(6, 0.5, 0.95)  # (1/2)^6 = 1.6% < 2.5%
