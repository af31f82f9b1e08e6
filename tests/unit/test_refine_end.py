"""Why ``--refine`` probes no further (analysis/refine_end.py): one line, from the verdicts the bisection read.

Trial E (finding 7): an open-loop run with ``--refine`` whose lowest level was undecided (too few
samples) and whose top level failed took no probe and said nothing. Each way refinement can end
now has its words, and they agree with the bisection: a reason is given exactly when the
bisection has no next probe.
"""

from __future__ import annotations

from loadtest.analysis import SloSpec, analyze
from loadtest.analysis.refine import next_refine_level, next_refine_rate
from loadtest.analysis.refine_end import LONGER, refine_end
from support.synthetic import T0, closed_loop_rows, request_row, run_dict, to_frame

SLO = {"ttft_ms": {"p95": 300}, "max_error_rate": 0.5}


def _closed(levels: list[tuple[int, float, float]]):
    """Closed-loop levels of (users, seconds, TTFT ms), back to back, analysed against SLO."""
    plan, rows, t = [], [], T0
    for i, (users, seconds, ttft) in enumerate(levels):
        plan.append({"index": i, "concurrency": users, "start_wall": t, "end_wall": t + seconds, "refine": False, "client": {}})
        rows += closed_loop_rows(i, users, t, seconds, ttft_ms=ttft, chunks=3)
        t += seconds
    return analyze(to_frame(rows), run_dict(plan, slo=SLO), SloSpec.from_dict(SLO)).levels


def _rates(levels: list[tuple[float, float]], seconds: float = 20.0):
    """Open-loop levels of (req/s, TTFT ms), evenly spaced arrivals, analysed against SLO."""
    plan, rows, t = [], [], T0
    for i, (rate, ttft) in enumerate(levels):
        plan.append({"index": i, "concurrency": 0, "start_wall": t, "end_wall": t + seconds, "rate_rps": rate, "client": {}})
        for k in range(int(rate * seconds)):
            at = t + k / rate
            rows.append(request_row(request_id=f"r{i}-{k}", level=0, level_index=i, start_wall=at, scheduled_wall=at,
                                    schedule_lag_ms=0.0, rate_rps=rate,
                                    chunk_ms=[ttft, ttft + 20.0, ttft + 40.0]))
        t += seconds
    return analyze(to_frame(rows), run_dict(plan, slo=SLO), SloSpec.from_dict(SLO)).levels


def test_an_undecided_lowest_level_says_why_nothing_is_bisected():
    # 1 user for 1.5 s: about ten requests, too few for a p95; 2 users pass; 8 users fail
    levels = _closed([(1, 1.5, 100.0), (2, 20.0, 100.0), (8, 20.0, 900.0)])
    assert [lv.status for lv in levels] == ["uncertain", "pass", "fail"]
    assert next_refine_level(levels) is None  # the bisection has no probe: the words say why
    end = refine_end(levels, 0)
    assert end.ended == "undecided" and end.probes == 0
    assert end.line().startswith("refine: nothing to bisect: the lowest level, 1 concurrent user, is uncertain (p95 TTFT is ")
    assert "too few samples), not a certain pass (8 concurrent users fails)" in end.line()
    assert end.line().endswith(LONGER)
    assert end.to_json() == {"ended": "undecided", "why": end.why, "probes": 0}


def test_a_closed_bracket_after_probes_and_the_two_ends_missing():
    levels = _closed([(4, 20.0, 100.0), (5, 20.0, 900.0)])
    assert next_refine_level(levels) is None
    end = refine_end(levels, 2)
    assert end.ended == "closed"
    assert end.line() == ("refine: done after 2 probes: the bracket is closed between a pass at 4 concurrent users "
                          "and a failure at 5 concurrent users (adjacent levels)")

    passing = _closed([(1, 20.0, 100.0), (2, 20.0, 100.0)])
    assert next_refine_level(passing) is None
    end = refine_end(passing, 0)
    assert end.ended == "no_failure" and "every tested level passed, up to 2 concurrent users" in end.line()

    # a lowest level that fails for certain is probed below, halving, down to 1 user
    assert next_refine_level(_closed([(4, 20.0, 900.0), (8, 20.0, 900.0)])) == 2
    assert next_refine_level(_closed([(3, 20.0, 900.0)])) == 1
    assert next_refine_level(_closed([(2, 20.0, 100.0), (4, 20.0, 900.0), (8, 20.0, 900.0)])) == 3  # then bisected
    failing = _closed([(1, 20.0, 900.0), (2, 20.0, 900.0)])
    assert next_refine_level(failing) is None
    end = refine_end(failing, 1)
    assert end.ended == "lowest_fails"
    assert end.line() == "refine: nothing to bisect: even 1 concurrent user fails, so no load holds the SLOs"


def test_an_undecided_probe_below_a_failing_level_is_not_probed_below():
    levels = _closed([(2, 20.0, 900.0), (4, 20.0, 900.0)])
    levels[0].status = "uncertain"  # the probe at 2 users left undecided (too few samples, a straddling interval)
    assert next_refine_level(levels) is None
    assert refine_end(levels, 1).ended == "undecided"


def test_a_failing_lowest_rate_is_halved_down_to_an_eighth_of_the_lowest_declared_one():
    assert next_refine_rate(_rates([(2.0, 900.0), (4.0, 900.0)])) == 1.0
    # 0.25 req/s is the floor (an eighth of 2): its half is not probed
    levels = _rates([(2.0, 900.0), (0.25, 900.0)], seconds=80.0)
    next(lv for lv in levels if lv.rate_rps == 0.25).refine = True  # the probe, not a declared level
    assert [lv.status for lv in levels] == ["fail", "fail"]
    assert next_refine_rate(levels) is None
    end = refine_end(levels, 3)
    assert end.ended == "lowest_fails"
    assert end.why == ("nothing to bisect: the lowest level, 0.25 req/s, fails, and refine probes no lower than an "
                       "eighth of the lowest declared level: the capacity is below it")


def test_a_rate_bracket_closes_at_the_resolution():
    levels = _rates([(8.0, 100.0), (8.3, 900.0)])
    assert [lv.status for lv in levels] == ["pass", "fail"]
    assert next_refine_rate(levels) is None  # 0.3 req/s apart: within 5% of 8.3 req/s
    end = refine_end(levels, 3)
    assert end.line() == ("refine: done after 3 probes: the bracket is closed between a pass at 8 req/s and a failure "
                          "at 8.3 req/s (within the resolution of 0.415 req/s: 5% of 8.3 req/s)")
    assert next_refine_rate(levels, 0.1) == 8.15  # a finer --rate-resolution would probe on
    assert "(within the resolution of 0.5 req/s: --rate-resolution)" in refine_end(levels, 3, 0.5).why


def test_a_trace_speedups_rounded_rates_reach_the_floor_they_name():
    """A trial's trace window at 3.522222 req/s swept at 8× (28.177778) failed at 8, 4 and 2× (7.044444):
    half of 2× (3.522222) sat 2.5e-8 under an eighth of 8× (3.52222225) and refine stopped an octave
    early, saying it was at its floor. Rates are kept to 6 decimals: 1× is probed."""
    from loadtest.analysis.refine import halving_passes_floor, probe_below

    assert probe_below([(7.044444, "fail"), (14.088889, "fail"), (28.177778, "fail")], 28.177778 / 8) == 3.522222
    assert not halving_passes_floor(7.044444, 28.177778 / 8) and halving_passes_floor(3.522222, 28.177778 / 8)
