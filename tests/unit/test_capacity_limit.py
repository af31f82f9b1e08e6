"""Why the capacity stops where it does (analysis/capacity_limit.py), on synthetic runs with known causes.

Each run is a closed loop whose latencies are a known function of the users, with or without
the server's own running and waiting gauges beside it, so each cause has one right answer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from loadtest.analysis import SloSpec, analyze
from loadtest.analysis.bounds import slot_limit
from loadtest.analysis.capacity_limit import capacity_limit
from loadtest.report.summary import summary_dict
from loadtest.report.why import limits_line
from loadtest.scrape.store import UP
from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame

LEVELS = [2, 4, 6, 8]
LEVEL_S = 10.0


def _run(slo, *, ttft=lambda c: 20.0, itl=lambda c: 10.0 + c, gauges=None, fail_every=None):
    """``gauges(c) -> (running, waiting)`` adds the server's scrapes; None: none scraped."""
    plan = level_plan(LEVELS, LEVEL_S)
    rows = []
    for lv in plan:
        c = lv["concurrency"]
        rows += closed_loop_rows(lv["index"], c, lv["start_wall"], LEVEL_S, ttft_ms=ttft(c), itl_ms=itl(c),
                                 warmup_s=1.0, fail_every=(fail_every or {}).get(c, 0), stagger=True)
    run = run_dict(plan, warmup_s=1.0, slo=slo)
    samples = None
    if gauges is not None:
        run["server_metrics"] = {"enabled": True, "url": "http://127.0.0.1:9000/metrics", "urls": [],
                                 "interval_s": 0.5, "signals": []}
        points = []
        for lv in plan:
            running, waiting = gauges(lv["concurrency"])
            for t in np.arange(lv["start_wall"] + 0.25, lv["end_wall"], 0.5):
                for metric, value in (("vllm:num_requests_running", running), ("vllm:num_requests_waiting", waiting),
                                      (UP, 1.0)):
                    points.append({"wall": t, "metric": metric, "labels": "{}", "value": value, "type": "gauge",
                                   "replica": ""})
        samples = pd.DataFrame(points)
    return analyze(to_frame(rows), run, SloSpec.from_dict(slo), server_samples=samples, resamples=100)


def test_an_itl_limit_is_the_decode_step():
    analysis = _run({"itl_ms": {"p95": 15.0}})  # ITL 10 + c: 14 at 4 users holds, 16 at 6 fails
    limit = capacity_limit(analysis)
    assert analysis.capacity.concurrency == 4
    assert limit["kind"] == "decode_step" and limit["users"] == 6 and limit["binding"] == "itl_ms.p95"
    assert "p95 ITL crosses its limit" in limit["sentence"]


def test_a_ttft_limit_with_requests_waiting_at_the_server_is_its_slots():
    """Four slots: past four users the server's waiting count reads the rest, and TTFT jumps."""
    analysis = _run({"ttft_ms": {"p95": 100.0}}, ttft=lambda c: 20.0 if c <= 4 else 300.0,
                    gauges=lambda c: (min(c, 4), max(0, c - 4)))
    limit = capacity_limit(analysis)
    assert analysis.capacity.concurrency == 4
    assert limit["kind"] == "slots" and limit["users"] == 6 and limit["waiting"] == 2
    assert "its waiting count read 2" in limit["sentence"] and "grew with the queue" in limit["sentence"]
    # the terminal and summary.json say the same
    assert f"why it stops there: {limit['sentence']}" in limits_line(analysis)
    assert summary_dict(analysis)["capacity_limit"] == limit


def test_without_a_waiting_count_a_short_batch_is_a_queue_or_the_prompts_compute():
    """The same queue with nothing scraped: the client sees fewer of its requests in the batch than users,
    and cannot tell a slot wait from a prompt's compute, so it names both."""
    analysis = _run({"ttft_ms": {"p95": 100.0}}, ttft=lambda c: 20.0 if c <= 4 else 300.0)
    limit = capacity_limit(analysis)
    assert limit["kind"] == "queue_or_prefill" and limit["waiting"] is None
    assert limit["sequences"] <= limit["users"] - 1
    assert "waited for a slot or for their prompt's compute" in limit["sentence"]


def test_a_long_first_token_with_nobody_waiting_is_the_prompts_compute():
    """Every request is running (the waiting count reads 0) and the first token takes 10 steps: prefill."""
    analysis = _run({"ttft_ms": {"p95": 90.0}}, ttft=lambda c: 25.0 * c, gauges=lambda c: (c, 0))
    limit = capacity_limit(analysis)
    assert analysis.capacity.concurrency == 2  # 50 ms at 2 holds, 100 at 4 fails
    assert limit["kind"] == "prefill" and limit["waiting"] == 0
    assert "the server's waiting count read 0" in limit["sentence"] and "decode steps at the median" in limit["sentence"]


def test_a_first_token_of_a_step_or_two_with_nobody_waiting_is_the_step():
    analysis = _run({"ttft_ms": {"p95": 21.0}}, ttft=lambda c: 16.0 + c, itl=lambda c: 10.0 + c,
                    gauges=lambda c: (c, 0))
    limit = capacity_limit(analysis)
    assert analysis.capacity.concurrency == 4 and limit["kind"] == "first_step"


def test_the_error_budget_first_is_errors_and_no_failing_level_is_none():
    analysis = _run({"itl_ms": {"p95": 1000.0}, "max_error_rate": 0.01}, fail_every={6: 3, 8: 3})
    assert capacity_limit(analysis)["kind"] == "errors"
    assert capacity_limit(_run({"itl_ms": {"p95": 1000.0}})) is None  # every level holds


def test_the_profile_names_the_slots_where_the_batch_stops_growing():
    """(users, batch) per level, as the profile's ladder measures them."""
    assert slot_limit([(1, 1), (2, 2), (4, 4), (8, 8), (16, 8.0)]) == 8  # 16 users, still 8 running
    assert slot_limit([(1, 1), (2, 2), (4, 4), (8, 8)]) is None  # every user in the batch
    # fewer in the batch than users, but the batch still grows with them: long prompts, not slots
    assert slot_limit([(1, 1), (2, 1.2), (4, 2.1), (8, 4.3)]) is None
    # a count a sequence short at one level with nothing before it that large is not a plateau
    assert slot_limit([(8, 8), (10, 9)]) is None


def _knee_run(chunks: int):
    """Steps of 10 + 0.5 ms a sequence up to 8 sequences, 1.5 ms a sequence past them (a knee at ~10)."""
    levels = [1, 2, 4, 8, 16]
    plan = level_plan(levels, LEVEL_S)
    rows = []
    for lv in plan:
        c = lv["concurrency"]
        rows += closed_loop_rows(lv["index"], c, lv["start_wall"], LEVEL_S, ttft_ms=20.0, itl_ms=max(10.0 + 0.5 * c, 1.5 * c),
                                 chunks=chunks, warmup_s=1.0, stagger=True)
    slo = {"itl_ms": {"p95": 1000.0}}
    return analyze(to_frame(rows), run_dict(plan, warmup_s=1.0, slo=slo), SloSpec.from_dict(slo), resamples=100)


def test_a_knee_made_where_most_steps_admit_a_newcomer_says_the_prompts_look_the_same():
    """Four-token answers: at 16 users about four requests start each step, and their prompts'
    compute lengthens most steps as a compute limit would (the quickstart's false knee)."""
    short = _knee_run(chunks=4)
    fit = summary_dict(short)["decode_fit"]
    assert fit["knee_sequences"] is not None and fit["prefills_per_step_past_knee"] > 3
    assert "but there most steps also computed a newcomer's prompt" in fit["sentence"]
    assert fit["bound_at_capacity"] == "compute" and "compute-bound or slowed by those prompts" in limits_line(short)
    from loadtest.report.why_html import why_section

    assert "compute-bound or slowed by those prompts</b>" in why_section(short)
    long = _knee_run(chunks=200)  # 200-token answers: a newcomer every dozen steps
    fit = summary_dict(long)["decode_fit"]
    assert fit["knee_sequences"] is not None and fit["prefills_per_step_past_knee"] < 0.2
    assert "newcomer" not in fit["sentence"] and "those prompts" not in limits_line(long)


def test_failures_past_the_binding_percentile_are_errors_not_a_queue():
    """At 6 users every 5th request fails (20%, within a 50% error budget) while the answered ones keep
    TTFT 20 ms: the p95 TTFT is unbounded by failures alone. The gauges read a queue there too, but
    naming the slots (as it did: "slots: ... grew with the queue") sends the user after the wrong cause."""
    analysis = _run({"ttft_ms": {"p95": 100.0}, "max_error_rate": 0.5}, fail_every={6: 5, 8: 5},
                    gauges=lambda c: (min(c, 4), max(0, c - 4)))
    limit = capacity_limit(analysis)
    assert analysis.capacity.concurrency == 4 and analysis.capacity.binding == "ttft_ms.p95"
    assert limit["kind"] == "errors" and limit["users"] == 6, limit
    assert "at 6 users 20% of requests failed (http_5xx " in limit["sentence"], limit["sentence"]
    assert "more than the 5% a p95 TTFT can leave out" in limit["sentence"]


def test_failures_within_the_percentile_leave_the_cause_to_the_latency():
    """1 in 50 failing (2%) at a p95 leaves the percentile to the answered requests: the queue binds."""
    analysis = _run({"ttft_ms": {"p95": 100.0}, "max_error_rate": 0.5}, ttft=lambda c: 20.0 if c <= 4 else 300.0,
                    fail_every={6: 50, 8: 50}, gauges=lambda c: (min(c, 4), max(0, c - 4)))
    limit = capacity_limit(analysis)
    assert limit["kind"] == "slots", limit


def test_a_running_count_pinned_at_the_batch_limit_is_not_the_autoscaling_trigger():
    """Four slots, the rest queue: running reads 4 at every level from 4 users up, waiting grows. Capacity 6
    (TTFT jumps at 8). Neither separates 6 from 8 in the scrapes' medians, and the most direct signal,
    running, was recommended at 3.2 (20% under 4): it fires at 4 users, where the capacity is 6 (a
    llama-server trial: 3.2 against a capacity of 13). The waiting count is the trigger, alone."""
    analysis = _run({"ttft_ms": {"p95": 100.0}}, ttft=lambda c: 20.0 if c <= 6 else 300.0,
                    gauges=lambda c: (min(c, 4), max(0, c - 4)))
    scaling = analysis.autoscaling
    assert analysis.capacity.concurrency == 6 and scaling is not None
    running = next(s for s in scaling.signals if s.role == "running")
    waiting = next(s for s in scaling.signals if s.role == "waiting")
    assert running.pinned and not waiting.pinned and "pinned at the server's batch limit" in running.why
    assert scaling.best == waiting.metric, scaling.best
    assert f"Scale out when {waiting.metric} > " in scaling.paragraph and "or when running >" not in scaling.paragraph
    assert "running requests are pinned at the server's batch limit (4 at capacity" in scaling.paragraph


def test_a_running_count_below_the_users_without_a_queue_is_not_pinned():
    """No request waits (the server's waiting count reads 0): running below the users is the client's think
    time or a short batch, not a limit: running stays the trigger."""
    analysis = _run({"itl_ms": {"p95": 15.0}}, gauges=lambda c: (max(1, c - 1), 0))
    scaling = analysis.autoscaling
    running = next(s for s in scaling.signals if s.role == "running")
    assert not running.pinned and scaling.best == running.metric


def test_failures_do_not_explain_a_per_gap_limit():
    """ITL is counted per gap: a refused request adds none, so 20% failures at 6 users leave the ITL p95 to
    the answered requests' gaps (16 ms against 15): the decode step binds, not the errors."""
    analysis = _run({"itl_ms": {"p95": 15.0}, "max_error_rate": 0.5}, fail_every={6: 5, 8: 5})
    limit = capacity_limit(analysis)
    assert analysis.capacity.binding == "itl_ms.p95" and limit["kind"] == "decode_step", limit
