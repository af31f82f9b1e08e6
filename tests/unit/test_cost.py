"""Cost arithmetic against worked examples (analysis/cost.py)."""

from __future__ import annotations

import pytest

from loadtest.analysis.cost import DAYS_PER_MONTH, Served, change, forecast, replicas_for, unit_cost
from loadtest.cost_cli import check_peak_for_mode
from loadtest.errors import InputError


def test_unit_cost_on_goodput_is_dearer_than_on_throughput():
    # $4/h; at capacity 10 req/s succeed but only 8 meet the SLO, 200 output + 500 prompt tokens each.
    served = Served(
        goodput_rps=8, good_output_tokens_per_s=8 * 200, good_prompt_tokens_per_s=8 * 500,
        requests_per_s=10, output_tokens_per_s=10 * 200,
    )
    cost = unit_cost(4.0, served)
    # 8 × 200 × 3600 = 5.76 M good output tokens an hour -> $4 / 5.76 = $0.6944 per million
    assert cost.usd_per_million_output_tokens == pytest.approx(4 / 5.76)
    # (1600 + 4000) × 3600 = 20.16 M tokens an hour
    assert cost.usd_per_million_tokens == pytest.approx(4 / 20.16)
    # 8 × 3600 = 28,800 good requests an hour -> $0.1389 per thousand
    assert cost.usd_per_thousand_requests == pytest.approx(4 / 28.8)
    # on throughput (10 req/s) it would look 20% cheaper: the SLO misses are not free
    assert cost.usd_per_million_output_tokens_throughput == pytest.approx(4 / 7.2)
    assert cost.usd_per_million_output_tokens_throughput < cost.usd_per_million_output_tokens


def test_nothing_served_within_the_slo_has_no_price():
    cost = unit_cost(4.0, Served(0.0, 0.0, 0.0, 5.0, 1000.0))
    assert cost.usd_per_million_output_tokens is None and cost.usd_per_thousand_requests is None
    assert cost.usd_per_million_output_tokens_throughput == pytest.approx(4 / 3.6)


def test_replicas_with_headroom():
    assert replicas_for(36, 10, 0.0) == 4
    assert replicas_for(36, 10, 0.2) == 5  # 8 per replica
    assert replicas_for(36, 12, 0.25) == 4  # 9 per replica: exactly 4, not 5 after float rounding
    assert replicas_for(0, 10, 0.2) == 0
    assert replicas_for(0.1, 10, 0.2) == 1


def test_forecast_autoscaled_against_static():
    # 12 hours at the peak, 12 hours at a quarter of it; 36 peak users, 10 per replica, 20% headroom
    shape = [1.0] * 12 + [0.25] * 12
    f = forecast(2.0, 10, 36, headroom=0.2, daily_shape=shape)
    # peak: 36 / 8 -> 5 replicas; quarter: 9 / 8 -> 2 replicas
    assert f.replicas_by_hour == [5] * 12 + [2] * 12
    assert f.peak_replicas == 5
    assert f.monthly_usd_autoscaled == pytest.approx((12 * 5 + 12 * 2) * 2.0 * DAYS_PER_MONTH)
    assert f.monthly_usd_static == pytest.approx(5 * 24 * 2.0 * DAYS_PER_MONTH)
    assert f.saving == pytest.approx(1 - 84 / 120)
    flat = forecast(2.0, 10, 36)
    assert flat.monthly_usd_autoscaled == flat.monthly_usd_static == pytest.approx(4 * 24 * 2 * DAYS_PER_MONTH)
    with pytest.raises(ValueError):
        forecast(2.0, 10, 36, daily_shape=[1.0] * 23)


def test_change():
    assert change(3.10, 2.21) == pytest.approx(-0.287, abs=1e-3)
    assert change(None, 2.0) is None and change(0.0, 1.0) is None


def test_a_peak_in_users_is_refused_for_a_run_of_rates():
    """An open-loop run's capacity is a rate: --peak-users was ignored without a word (no forecast)."""
    with pytest.raises(InputError, match="--peak-users 40: the levels are rates .open_loop.*--peak-rps"):
        check_peak_for_mode({"peak_users": 40.0}, "open_loop")
    with pytest.raises(InputError, match="trace_replay"):
        check_peak_for_mode({"peak_users": 40.0}, "trace_replay")
    check_peak_for_mode({"peak_users": 40.0}, "closed_loop")  # users for users
    check_peak_for_mode({"peak_users": 40.0}, None)  # a run from before load_mode was kept: closed loop
    check_peak_for_mode({"peak_rps": 40.0}, "open_loop")


def test_the_price_ignoring_the_slo_is_never_dearer_than_on_goodput():
    """Every request good, yet goodput's $/1M output tokens came out 0.4% cheaper than the "all
    successful tokens" contrast (a trial: $2.88 against $2.89): the two counted one flow with two
    estimators (each request's tokens by the share of its life in the window, against the chunks that
    arrived in it). Both are now the first, so they agree when all are good."""
    from loadtest.analysis import SloSpec, analyze
    from loadtest.analysis.run_cost import run_cost
    from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame

    plan = level_plan([4], 10.0)
    rows = closed_loop_rows(0, 4, plan[0]["start_wall"], 10.0, ttft_ms=50.0, itl_ms=37.0, chunks=16, warmup_s=1.0)
    run = run_dict(plan, warmup_s=1.0, slo={"e2e_ms": {"p95": 1000.0}})  # e2e about 600 ms: every request good
    run["cost_options"] = {"usd_per_hour": 4.0}
    analysis = analyze(to_frame(rows), run, SloSpec.from_dict({"e2e_ms": {"p95": 1000.0}}), resamples=50)
    assert analysis.capacity.goodput_rps == pytest.approx(analysis.capacity.requests_per_s)
    cost = run_cost(analysis)
    assert cost["usd_per_million_output_tokens_throughput"] == pytest.approx(cost["usd_per_million_output_tokens"])


def test_the_cost_change_sentence_says_a_fleets_capacity_and_a_unary_runs_price():
    """compare's cost line called a fleet's capacity "users per replica" (16 for 2 replicas) and priced
    an embeddings run in "$/1M output tokens n/a → n/a" (it has none)."""
    from loadtest.compare.cost import cost_change

    def summary(cap, replicas, out, tokens):
        return {"capacity": {"concurrency": cap}, "target": {"replicas": replicas},
                "cost": {"usd_per_hour": 4.0, "usd_per_million_output_tokens": out, "usd_per_million_tokens": tokens,
                         "usd_per_thousand_requests": 0.02, "forecast": None}}

    one = cost_change(summary(4, 1, 3.81, 1.0), summary(8, 1, 2.23, 0.6))
    assert one["sentence"].startswith("capacity 4 → 8 users per replica: $/1M output tokens 3.81 → 2.23, −41%")
    fleet = cost_change(summary(16, 2, 3.0, 1.0), summary(20, 2, 2.5, 0.9))
    assert fleet["replicas"] == {"baseline": 2, "candidate": 2}
    assert fleet["sentence"].startswith("capacity 16 → 20 users (2 → 2 replicas: 8 → 10 per replica): $/1M output tokens")
    unary = cost_change(summary(6, 1, None, 0.05), summary(8, 1, None, 0.04))
    assert unary["sentence"].startswith("capacity 6 → 8 users per replica: $/1M tokens 0.05 → 0.04, −20%")
