"""Request classes' capacities: what each class's verdict claims, and records that belong to no class.

Trial E (finding 7): an open-loop run with two classes read overall "uncertain" at 8 req/s while
``capacity.classes.chat`` said "This endpoint holds 8 req/s within the SLOs". Two causes: the
arrivals dropped at ``max_in_flight`` carry no class, and pandas' string column turned their
None into NaN, which the analysis took for a class named "nan" with no request: its error budget,
``no_data`` at every level, made every level at best uncertain. And a class's own capacity spoke
for "this endpoint", though it judges the class's requests alone.
"""

from __future__ import annotations

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
