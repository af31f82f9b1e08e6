"""Request classes' capacities: what each class's verdict claims, and records that belong to no class.

Trial E (finding 7): an open-loop run with two classes read overall "uncertain" at 8 req/s while
``capacity.classes.chat`` said "This endpoint holds 8 req/s within the SLOs". Two causes: the
arrivals dropped at ``max_in_flight`` carry no class, and pandas' string column turned their
None into NaN, which the analysis took for a class named "nan" with no request: its error budget,
``no_data`` at every level, made every level at best uncertain. And a class's own capacity spoke
for "this endpoint", though it judges the class's requests alone.
"""

from __future__ import annotations

import pytest

from loadtest.analysis import SloSpec, analyze
from support.synthetic import closed_loop_rows, failed_row, level_plan, run_dict, to_frame

CLASSES = [{"name": "chat", "weight": 1, "slo": {"ttft_ms": {"p95": 300}}},
           {"name": "summarize", "weight": 1, "slo": {"ttft_ms": {"p95": 300}}}]


def _run(levels: list[int], ttft_ms: list[float], extra: list[dict] | None = None):
    plan = level_plan(levels, 20.0)
    rows = []
    for i, (c, ttft) in enumerate(zip(levels, ttft_ms)):
        for k, row in enumerate(closed_loop_rows(i, c, plan[i]["start_wall"], 20.0, ttft_ms=ttft, chunks=3)):
            rows.append(row | {"class": CLASSES[k % 2]["name"]})
    run = run_dict(plan, slo={"max_error_rate": 0.5})
    run["scenario"]["workload"] = {"classes": CLASSES}
    return analyze(to_frame(rows + (extra or [])), run, SloSpec.from_dict({"max_error_rate": 0.5}))


def test_a_record_without_a_class_makes_no_class_and_leaves_the_verdicts_alone():
    # an arrival dropped at max_in_flight: recorded as failed, before any class was drawn for it
    dropped = failed_row("dropped", e2e_ms=0.0, level=2, level_index=1, start_wall=1_764_000_025.0)
    analysis = _run([2, 4], [100.0, 100.0], [dropped])
    assert set(analysis.capacity.classes) == {"chat", "summarize"}
    for level in analysis.levels:
        assert set(level.classes) == {"chat", "summarize"}
        assert all(isinstance(c.class_name, str) or c.class_name is None for c in level.checks)
        assert level.status == "pass", [(c.class_name, c.name, c.verdict) for c in level.checks]
    assert analysis.capacity.verdict == "at_least"
    assert analysis.levels[1].errors == 1  # the dropped arrival still counts, in the overall error budget


def test_a_class_capacity_speaks_for_the_class_not_the_endpoint():
    analysis = _run([2, 4, 8], [100.0, 100.0, 900.0])
    chat = analysis.capacity.classes["chat"]
    assert chat.verdict == "found" and chat.concurrency == 4
    assert chat.message.startswith("The chat class, judged on its own requests, holds 4 concurrent users within its SLO; "
                                   "at 8 the chat class's p95 TTFT"), chat.message
    assert "endpoint" not in chat.message
    # the whole run's verdict keeps its words
    assert analysis.capacity.message.startswith("This endpoint holds 4 concurrent users within the SLOs; ")


def test_the_terminal_says_a_class_is_undecided_not_below_the_lowest_level():
    """Trial E: the summarize class, undecided at 2 req/s (too few samples), passing at 8 and failing at
    16, read "summarize below the lowest level", a failure at 2 req/s that its data do not show."""
    from types import SimpleNamespace

    from loadtest.analysis.results import Capacity
    from loadtest.report.terminal import _class_capacities

    def line(**classes):
        return _class_capacities(SimpleNamespace(capacity=SimpleNamespace(classes=classes)))

    undecided = Capacity(None, "uncertain", "", binding="e2e_ms.p50", upper_bound_rate_rps=8.0,
                         first_failing_rate_rps=16.0, max_tested_rate_rps=16.0)
    assert line(summarize=undecided) == ("each class alone holds: summarize no level with confidence, up to 8 req/s "
                                         "if its undecided levels hold (fails at 16 req/s on e2e_ms.p50)")
    partly = Capacity(2, "uncertain", "", upper_bound=4, certain_concurrency=2)
    assert line(chat=partly) == "each class alone holds: chat 2 with confidence, up to 4 if its undecided levels hold"


def test_a_rate_levels_goodput_never_exceeds_what_it_completed():
    """Trial F: with two classes at a rate, "done 1.0/s, good/s 1.36": the level's goodput was the sum of
    the classes', each counted over its own span (shifted by its own requests' life), which need not
    add up to the level's. Every request here meets its class's limits: goodput is the level's flow."""
    from support.synthetic import open_loop_rows, rate_level_plan

    classes = [{"name": "chat", "weight": 3, "slo": {"ttft_ms": {"p95": 3000}}},
               {"name": "summarize", "weight": 1, "slo": {"e2e_ms": {"p50": 5000}}}]
    plan = rate_level_plan([2.0, 4.0], 8.0, 3.0)
    rows = []
    for lv in plan:
        for name, share, ttft, itl, chunks, seed in (("chat", 0.75, 50, 5, 32, 0), ("summarize", 0.25, 400, 10, 96, 10)):
            for r in open_loop_rows(lv["index"], lv["rate_rps"] * share, lv["start_wall"], 11.0, ttft_ms=ttft,
                                    itl_ms=itl, chunks=chunks, warmup_s=1.0, seed=seed + lv["index"]):
                rows.append(r | {"class": name, "rate_rps": lv["rate_rps"], "request_id": name + r["request_id"]})
    run = run_dict(plan, slo={"max_error_rate": 0.5})
    run["scenario"]["workload"] = {"classes": classes}
    run["load_mode"] = "open_loop"
    analysis = analyze(to_frame(rows), run, SloSpec.from_dict({"max_error_rate": 0.5}))
    for level in analysis.levels:
        flows = sum(c.requests_per_s for c in level.classes.values())
        assert abs(flows - level.requests_per_s) > 0.05  # the classes' spans differ from the level's
        assert level.goodput_rps == pytest.approx(level.requests_per_s), (level.goodput_rps, level.requests_per_s)
