"""Capacity verdicts and the refine bisection, end to end through ``analyze``."""

from __future__ import annotations

import re

import numpy as np
import pytest

from loadtest.analysis import SloSpec, analyze, next_refine_level
from support.synthetic import (
    T0,
    closed_loop_rows,
    level_plan,
    request_row,
    run_dict,
    to_frame,
)


def sweep(concurrencies, slo, *, itl=lambda c: 10.0 * c, ttft=lambda c: 100.0, seconds=20.0,
          saturated=(), fail_every=None, warmup_s=0.0, fail_kind="http_5xx"):
    """A stepped run where each level's latency is a known function of its concurrency."""
    levels = level_plan(list(concurrencies), seconds)
    rows = []
    for lv in levels:
        c = lv["concurrency"]
        rows += closed_loop_rows(
            lv["index"], c, lv["start_wall"], seconds * 0.8, ttft_ms=ttft(c), itl_ms=itl(c), chunks=8,
            fail_every=(fail_every or {}).get(c, 0), fail_kind=fail_kind,
        )
        if c in saturated:
            lv["client"] = {"saturated": True, "reason": "event-loop lag p99 120 ms", "loop_lag_p99_ms": 120.0}
    return analyze(to_frame(rows), run_dict(levels, warmup_s=warmup_s), SloSpec.from_dict(slo))


def test_capacity_found_with_binding_slo_and_message():
    analysis = sweep([1, 2, 4, 8], {"itl_ms": {"p95": 45}, "max_error_rate": 0.01})
    cap = analysis.capacity
    assert (cap.concurrency, cap.verdict, cap.first_failing, cap.binding) == (4, "found", 8, "itl_ms.p95")
    assert cap.binding_value == pytest.approx(80.0) and cap.binding_limit == 45
    assert cap.binding_ratio == pytest.approx(80 / 45)
    assert cap.message == (
        "This endpoint holds 4 concurrent users within the SLOs; at 8 the p95 ITL is 80.0 ms against a 45 ms limit."
    )
    level4 = analysis.level(4)
    assert cap.requests_per_s == level4.requests_per_s and cap.goodput_rps == level4.goodput_rps
    assert cap.output_tokens_per_s == pytest.approx(level4.output_tokens_per_s)
    assert [lv.passed for lv in analysis.levels] == [True, True, True, False]


def test_message_matches_the_issue_example():
    analysis = sweep([5, 6], {"itl_ms": {"p95": 120}}, itl=lambda c: {5: 100.0, 6: 130.0}[c])
    assert analysis.capacity.message == (
        "This endpoint holds 5 concurrent users within the SLOs; at 6 the p95 ITL is 130 ms against a 120 ms limit."
    )


def test_binding_is_the_check_furthest_over_its_limit():
    analysis = sweep([1, 2, 4, 8], {"itl_ms": {"p95": 70}, "ttft_ms": {"p95": 450}}, ttft=lambda c: 100.0 * c)
    cap = analysis.capacity
    failed = {c.name for c in analysis.level(8).checks if c.verdict == "fail"}
    assert failed == {"itl_ms.p95", "ttft_ms.p95"}
    assert cap.binding == "ttft_ms.p95"  # 800/450 = 1.78 beats 80/70 = 1.14


def test_error_rate_can_be_the_binding_slo():
    analysis = sweep([1, 2, 4], {"itl_ms": {"p95": 45}, "max_error_rate": 0.01}, fail_every={4: 5})
    assert analysis.capacity.concurrency == 2
    assert analysis.capacity.binding == "error_rate"
    assert re.search(r"at 4 the error rate is (19|20)\.?\d*% against a 1% budget", analysis.capacity.message)
    # what the failures were: 429s from a limiter in front read differently than the server's 5xx
    errors = analysis.level(4).errors
    assert f"against a 1% budget (http_5xx {errors})" in analysis.capacity.message, analysis.capacity.message
    limited = sweep([1, 2, 4], {"itl_ms": {"p95": 45}, "max_error_rate": 0.01}, fail_every={4: 5},
                    fail_kind="rate_limited")
    assert f"(rate_limited {limited.level(4).errors})" in limited.capacity.message


def test_at_least_when_every_level_passes():
    cap = sweep([1, 2, 4, 16], {"itl_ms": {"p95": 1000}}).capacity
    assert (cap.concurrency, cap.verdict, cap.first_failing, cap.binding) == (16, "at_least", None, None)
    assert "capacity ≥ max tested (16)" in cap.message


def test_below_minimum_when_the_first_level_fails():
    cap = sweep([1, 2, 4], {"itl_ms": {"p95": 5}}).capacity
    assert (cap.concurrency, cap.verdict, cap.first_failing, cap.binding) == (None, "below_minimum", 1, "itl_ms.p95")
    assert cap.message.startswith("Even the lowest tested level (1 concurrent user) fails the SLOs")


def test_uncertain_when_a_ci_straddles_the_limit_at_capacity():
    levels = level_plan([2, 4], 60.0)
    # level 2: 40 TTFTs evenly 400..600 ms -> p95 = 590 ms exactly at the limit; the CI straddles it
    rows = [request_row(request_id=f"a{i}", level=2, level_index=0, start_wall=T0 + i,
                        chunk_ms=[float(t), t + 10.0]) for i, t in enumerate(np.linspace(400, 600, 40))]
    rows += [request_row(request_id=f"b{i}", level=4, level_index=1, start_wall=T0 + 60 + i,
                         chunk_ms=[2000.0, 2010.0]) for i in range(40)]
    analysis = analyze(to_frame(rows), run_dict(levels), SloSpec.from_dict({"ttft_ms": {"p95": 590}}))
    check = analysis.level(2).check("ttft_ms.p95")
    assert check.value == pytest.approx(590.0)
    assert check.ci[0] < 590 < check.ci[1]
    assert check.verdict == "uncertain" and analysis.level(2).status == "uncertain"
    cap = analysis.capacity
    assert (cap.concurrency, cap.upper_bound, cap.verdict, cap.first_failing) == (None, 2, "uncertain", 4)
    assert cap.certain_concurrency is None and cap.uncertain_levels == [2]
    assert "uncertain" in cap.message and "95% CI" in cap.message
    assert "No tested level holds the SLOs with confidence, and up to 2" in cap.message


def test_client_saturation_at_a_deciding_level_is_the_verdict():
    analysis = sweep([1, 2, 4, 8], {"itl_ms": {"p95": 45}}, saturated={8})
    cap = analysis.capacity
    assert (cap.concurrency, cap.verdict, cap.first_failing) == (4, "client_saturated", 8)
    assert "saturated at concurrency 8" in cap.message and "not trustworthy" in cap.message
    assert analysis.level(8).client_saturated
    assert any("saturated" in w for w in analysis.warnings)


def test_saturation_above_the_first_failure_does_not_change_the_verdict():
    analysis = sweep([1, 2, 4, 8], {"itl_ms": {"p95": 25}}, saturated={8})
    assert (analysis.capacity.concurrency, analysis.capacity.verdict) == (2, "found")
    assert analysis.capacity.saturated_levels == [8]


@pytest.mark.parametrize("with_levels", [False, True])
def test_no_data(with_levels):
    levels = level_plan([1, 2], 10.0) if with_levels else []
    analysis = analyze(to_frame([]), run_dict(levels), SloSpec.from_dict({"itl_ms": {"p95": 50}}))
    cap = analysis.capacity
    assert (cap.concurrency, cap.verdict) == (None, "no_data")
    assert cap.message
    assert all(lv.status == "no_data" for lv in analysis.levels)


def test_warmup_longer_than_the_level_is_no_data_not_a_crash():
    analysis = sweep([1, 2], {"itl_ms": {"p95": 50}}, seconds=4.0, warmup_s=10.0)
    assert analysis.capacity.verdict == "no_data"
    assert any("warmup" in w for w in analysis.warnings)


def test_every_request_failing_is_below_minimum_not_a_crash():
    levels = level_plan([1, 2], 10.0)
    rows = []
    for lv in levels:
        rows += closed_loop_rows(lv["index"], lv["concurrency"], lv["start_wall"], 8.0, fail_every=1,
                                 fail_kind="connect")
    analysis = analyze(to_frame(rows), run_dict(levels),
                       SloSpec.from_dict({"ttft_ms": {"p95": 500}, "itl_ms": {"p95": 50}, "max_error_rate": 0.01}))
    assert analysis.capacity.verdict == "below_minimum"
    assert analysis.level(1).error_rate == 1.0
    assert analysis.level(1).check("itl_ms.p95").verdict == "no_data"


def test_no_slos_means_at_least_with_a_warning():
    analysis = sweep([1, 2], {})
    assert analysis.capacity.verdict == "at_least"
    assert any("no SLOs" in w for w in analysis.warnings)


# -- refine -------------------------------------------------------------------------------------


def test_refine_bisection_sequence():
    seen = [(8, True), (16, False)]
    assert next_refine_level(seen) == 12
    seen.append((12, True))
    assert next_refine_level(seen) == 14
    seen.append((14, False))
    assert next_refine_level(seen) == 13
    seen.append((13, True))
    assert next_refine_level(seen) is None  # 13 passes, 14 fails: adjacent

    seen = [(8, True), (16, False), (12, False)]
    assert next_refine_level(seen) == 10
    assert next_refine_level(seen + [(10, True)]) == 11
    assert next_refine_level(seen + [(10, True), (11, False)]) is None


@pytest.mark.parametrize(
    "results",
    [
        [],
        [(1, True), (2, True), (4, True)],  # nothing fails
        [(1, False), (2, False)],  # no pass below the first failure
        [(4, True), (5, False)],  # adjacent
        [(4, None), (8, None)],  # no data
    ],
)
def test_refine_without_a_bracket_is_none(results):
    assert next_refine_level(results) is None


@pytest.mark.parametrize("true_capacity", range(8, 16))
def test_refine_converges_on_the_true_capacity(true_capacity):
    seen = [(c, c <= true_capacity) for c in (1, 2, 4, 8, 16)]
    for _ in range(10):
        nxt = next_refine_level(seen)
        if nxt is None:
            break
        seen.append((nxt, nxt <= true_capacity))
    passes = [c for c, ok in seen if ok]
    fails = [c for c, ok in seen if not ok]
    assert max(passes) == true_capacity and min(fails) == true_capacity + 1


def test_refine_accepts_level_results():
    analysis = sweep([1, 2, 4, 8], {"itl_ms": {"p95": 45}})
    # ITL = 10 x users crosses 45 ms at 4.5: the probe is the first integer past it, not the midpoint 6
    assert next_refine_level(analysis.levels) == 5


def _straddling_run(decision: dict | None):
    """Level 1 passes; level 2's TTFT p95 sits on its 400 ms limit (the interval straddles it)."""
    from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame

    plan = level_plan([1, 2], 20.0)
    rows = closed_loop_rows(0, 1, plan[0]["start_wall"], 20.0, ttft_ms=100, jitter=0.05, seed=1)
    rows += closed_loop_rows(1, 2, plan[1]["start_wall"], 20.0, ttft_ms=370, jitter=0.05, seed=2)
    if decision is not None:
        plan[1]["decision"] = decision
    slo = {"ttft_ms": {"p95": 400}, "max_error_rate": 0.5}
    return to_frame(rows), run_dict(plan, slo=slo), SloSpec.from_dict(slo)


LOOK_FAIL = {"verdict": "fail", "why": "p95 TTFT is 430 ms against a 400 ms limit", "check": "ttft_ms.p95",
             "ended": "decided", "ran_s": 8.0, "looks": 2, "extended": False}


def test_a_level_a_look_failed_stays_failed_when_the_full_data_only_straddles():
    """The sweep stopped at the look's fail: the report must give the same, decided answer."""
    frame, run, slo = _straddling_run(None)
    undecided = analyze(frame, run, slo)
    assert undecided.levels[1].status == "uncertain"  # the premise: on all the data it straddles

    frame, run, slo = _straddling_run(LOOK_FAIL)
    decided = analyze(frame, run, slo)
    level = decided.levels[1]
    assert level.status == "fail"
    (check,) = [c for c in level.checks if c.name == "ttft_ms.p95"]
    assert check.verdict == "fail" and "decided by the look" in check.reason
    assert decided.capacity.first_failing == 2 and decided.capacity.concurrency == 1


def test_a_look_decision_is_not_carried_to_other_slos_or_over_a_certain_result():
    frame, run, _ = _straddling_run(LOOK_FAIL)
    other = SloSpec.from_dict({"ttft_ms": {"p95": 401}, "max_error_rate": 0.5})  # a re-analysis with another SLO
    assert analyze(frame, run, other).levels[1].status == "uncertain"
    # A look's pass never overrides a certain fail of the full data.
    frame, run, slo = _straddling_run({**LOOK_FAIL, "verdict": "pass", "check": None})
    loose = SloSpec.from_dict({"ttft_ms": {"p95": 300}, "max_error_rate": 0.5})
    run["scenario"]["slo"] = {"ttft_ms": {"p95": 300}, "max_error_rate": 0.5}
    assert analyze(frame, run, loose).levels[1].status == "fail"


def test_a_level_where_every_request_failed_is_not_blamed_on_single_chunk_answers():
    """With the server gone (every request refused) ITL has no samples; the warning asked whether
    every response arrived in a single chunk, which sends a reader after the wrong cause."""
    analysis = sweep([1, 2], {"itl_ms": {"p95": 45}}, fail_every={2: 1})
    said = [w for w in analysis.warnings if w.startswith("itl_ms.p95 has no samples")]
    assert said and "every request there failed" in said[0] and "single chunk" not in said[0], analysis.warnings
    levels = level_plan([1], 10.0)  # answers of one chunk each: no gaps and no failures, the hint's own case
    rows = closed_loop_rows(0, 1, levels[0]["start_wall"], 8.0, chunks=1)
    analysis = analyze(to_frame(rows), run_dict(levels), SloSpec.from_dict({"itl_ms": {"p95": 45}}))
    assert any("single chunk" in w for w in analysis.warnings), analysis.warnings


def test_a_busy_host_over_undecided_levels_does_not_say_the_lowest_fails():
    """An embeddings run on a busy host: "taken at face value, even the lowest level fails" over a lowest
    level that was uncertain, not failed."""
    from types import SimpleNamespace

    from loadtest.analysis.capacity import _message
    from loadtest.analysis.results import Capacity

    def level(load, reason="the host was busy"):
        return SimpleNamespace(concurrency=load, load=load, rate_rps=None, speedup=None, label=f"{load} users",
                               client={"reason": reason}, client_near_limit=False)

    one, two = level(1), level(2)
    cap = Capacity(concurrency=None, verdict="host_contended", message="", max_tested=2)
    slo = SloSpec.from_dict({"itl_ms": {"p95": 50}})
    undecided = _message(cap, None, None, None, [one, two], [one, two], slo, 0.95)
    assert "no level passed with confidence" in undecided and "lowest level fails" not in undecided, undecided
    failed = _message(cap, None, one, None, [], [one], slo, 0.95)
    assert "even the lowest level fails" in failed, failed
    above_undecided = _message(cap, None, two, None, [one], [one, two], slo, 0.95)
    assert "no level passed with confidence" in above_undecided, above_undecided


def test_a_level_without_a_request_is_no_data_and_not_also_too_few_samples():
    """A level with no measured request read both "ttft_ms.p95 is computed from too few samples at 4
    (flagged low_n)" and "no request was measured at 4": 0 samples are none, not too few."""
    levels = level_plan([1, 2, 4], 10.0)
    rows = []
    for lv in levels[:2]:
        rows += closed_loop_rows(lv["index"], lv["concurrency"], lv["start_wall"], 8.0, ttft_ms=100.0, itl_ms=10.0, chunks=8)
    analysis = analyze(to_frame(rows), run_dict(levels), SloSpec.from_dict({"ttft_ms": {"p95": 500}, "itl_ms": {"p95": 50}}))
    assert analysis.levels[-1].status == "no_data"
    assert any(w.startswith("no request was measured at concurrency 4") for w in analysis.warnings), analysis.warnings
    assert not any("too few samples at concurrency 4" in w for w in analysis.warnings), analysis.warnings
