"""Open loop: what a short window can tell, a rate the server does not sustain, and whose reason a row shows.

A trial (findings 5, 6 and 8):

* a rate level that ended early "once decided" had a 2.56 s window against 1.7 s requests; the
  successes that *ended* in the window were the sends of one life earlier, which the level, begun
  1 s before its window, had only partly made: "done" read 6.2 of 8.6 sends a second, the `!`
  said the server could not keep up at a third of its capacity, and goodput weighed the warm-up's
  requests;
* ``--slo ttft_ms.p95=1200`` on a level offered 8 req/s to a server that serves 6.67 passed it:
  "capacity ≥ 8 req/s" and an autoscaling target of 7.6 req/s a replica, while the run's own
  queue-growth warning said the server sustains about 6.61;
* a level decided by a look kept the look's "p95 TTFT is unbounded" beside a final p95 of 1,007 ms.

The records are made here, from a server whose every request's life is known.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loadtest.analysis import analyze
from loadtest.analysis.slo import SloSpec

T0 = 1000.0


def _level(rate: float, window_s: float, life_s: float, warmup_s: float = 1.0, bad_every: int = 0,
           ttft_s: float = 0.02, tokens: int = 96):
    """One rate level from a server that keeps up: constant arrivals from the level's start until its
    hold ends (the hold keeps the rate until every measured request has ended), each request
    ``life_s`` long; every ``bad_every``-th one streams slower than the SLO's ITL limit allows."""
    end_wall = T0 + warmup_s + window_s
    hold_end = end_wall + life_s * (1.5 if bad_every else 1.0)  # until the last measured request has ended
    t = T0 + np.arange(0.0, hold_end - T0, 1.0 / rate)
    n = len(t)
    life = np.full(n, life_s)
    if bad_every:
        life[::bad_every] = life_s * 1.5  # TPOT 1.5 × the others': over the per-request limit below
    ttft = np.full(n, ttft_s * 1000.0)
    e2e = life * 1000.0
    frame = pd.DataFrame({
        "request_id": [f"r{i}" for i in range(n)], "worker": "local", "user": 0, "level": 0,
        "level_index": 0, "warmup": False, "start_wall": t,
        "ttfb_ms": ttft, "ttft_ms": ttft, "e2e_ms": e2e,
        "chunk_ms": [list(np.linspace(a, b, tokens)) for a, b in zip(ttft, e2e)],
        "chunk_tokens": [[1] * tokens] * n, "completion_tokens": tokens, "token_source": "usage",
        "status": 200, "ok": True, "error_kind": None, "error": None,
        "rate_rps": rate, "scheduled_wall": t, "schedule_lag_ms": 0.0,
    })
    run = {"warmup_s": warmup_s, "ended_wall": hold_end + 1.0, "levels": [{
        "index": 0, "concurrency": 0, "start_wall": T0, "end_wall": end_wall, "rate_rps": rate,
        "decision": {"verdict": "pass", "why": "every check passes", "check": None, "ended": "decided_early"},
        "looks": [{"at_s": warmup_s + window_s, "verdict": "pass", "why": "every check passes"}],
        "hold": {"start_wall": end_wall, "end_wall": hold_end, "ended": "drained", "censored": 0, "cap_s": 30.0},
    }]}
    return frame, run


def test_a_short_window_after_a_drained_server_is_not_flagged_when_the_server_keeps_up():
    """The trial's level: 8 req/s, 1.7 s requests, a 1 s warm-up and a 2.56 s window. The server keeps
    up (every request takes the same 1.7 s), so its completions are the sends, a life later."""
    frame, run = _level(8.0, 2.56, 1.7)
    level = analyze(frame, run, SloSpec.from_dict({"itl_ms": {"p50": 22}})).levels[0]
    o = level.open_loop
    assert o["sent_rps"] == pytest.approx(8.0, rel=0.06)
    assert o["server_kept_up"], o
    assert o["completed_rps"] == pytest.approx(8.0, rel=0.06), o  # not 5.8: the sends one life before the window
    assert o.get("keep_up_told"), o
    assert level.requests_per_s == pytest.approx(8.0, rel=0.06)
    assert level.goodput_rps == pytest.approx(8.0, rel=0.06)


def test_goodput_is_the_flow_times_the_good_share_whatever_the_window_against_the_life():
    """A quarter of the requests miss the per-request limit: the goodput is 3/4 of the served rate,
    in a window shorter than two lives as in a long one (counted by share of life in the window, the
    short one read it 5-10% low: the warm-up's requests had only part of their lives in it)."""
    slo = SloSpec.from_dict({"itl_ms": {"p50": 25}})
    for window_s in (3.0, 30.0):
        frame, run = _level(8.0, window_s, 1.7, bad_every=4)
        level = analyze(frame, run, slo).levels[0]
        assert level.goodput_rps == pytest.approx(0.75 * level.requests_per_s, rel=0.03), window_s
        assert level.goodput_rps == pytest.approx(6.0, rel=0.03), (window_s, level.goodput_rps)


def test_a_window_too_short_to_tell_says_so_and_does_not_flag():
    """A 1.5 s window against 2.2 s requests, 1 s after the level began: nothing in it is past the
    filling of the requests in flight, so whether the server kept up cannot be told: never `!`."""
    frame, run = _level(16.0, 1.5, 2.2)
    analysis = analyze(frame, run, SloSpec.from_dict({"itl_ms": {"p50": 40}}))
    o = analysis.levels[0].open_loop
    assert o["server_kept_up"], o
    assert not o.get("keep_up_told", True), o
    said = [w for w in analysis.warnings if "too short to tell whether the server kept up" in w]
    assert said and "16 req/s" in said[0], analysis.warnings


def _queued(rate: float, service: float, seconds: float, warmup_s: float = 0.0):
    """A level of ``rate`` req/s at constant arrivals to a one-at-a-time FIFO server (``service`` s
    each); the rate is held after the window until the last measured request ends (the hold)."""
    window_end = T0 + warmup_s + seconds
    t = T0 + np.arange(int(rate * (warmup_s + seconds))) / rate
    begin, free = np.empty_like(t), T0
    for i, arrival in enumerate(t):
        begin[i] = max(arrival, free)
        free = begin[i] + service
    hold_end = float(free)
    held = np.arange(window_end, hold_end, 1.0 / rate)  # the hold's sends keep the rate: not measured
    t_all = np.concatenate([t, held])
    ends = np.concatenate([begin + service, np.maximum(held, hold_end) + service])
    ttft = (np.concatenate([begin, np.maximum(held, hold_end)]) - t_all) * 1000.0 + 10.0
    e2e = (ends - t_all) * 1000.0
    n = len(t_all)
    frame = pd.DataFrame({
        "request_id": [f"r{i}" for i in range(n)], "worker": "local", "user": 0, "level": 0, "level_index": 0,
        "warmup": False, "start_wall": t_all, "ttfb_ms": ttft, "ttft_ms": ttft, "e2e_ms": e2e,
        "chunk_ms": [[a, a + 45.0, b] for a, b in zip(ttft, e2e)], "chunk_tokens": [[1, 1, 1]] * n,
        "completion_tokens": 3, "token_source": "usage", "status": 200, "ok": True, "error_kind": None,
        "error": None, "rate_rps": rate, "scheduled_wall": t_all, "schedule_lag_ms": 0.0,
    })
    run = {"warmup_s": warmup_s, "ended_wall": hold_end + 5.0, "levels": [{
        "index": 0, "concurrency": 0, "start_wall": T0, "end_wall": window_end, "rate_rps": rate,
        "hold": {"start_wall": window_end, "end_wall": hold_end, "ended": "drained", "censored": 0, "cap_s": 30.0},
    }]}
    return frame, run


def test_a_level_whose_queue_grows_and_whose_completions_fall_short_never_passes():
    """8 req/s to a server that serves 6.67 (150 ms each), 4.5 s: the TTFT p95 stays under a loose
    1.2 s limit, but the queue grows 0.2 s a second and 6.67 req/s complete: the level fails, in words."""
    frame, run = _queued(8.0, 0.15, 4.5, warmup_s=1.0)
    analysis = analyze(frame, run, SloSpec.from_dict({"ttft_ms": {"p95": 1200}}))
    level = analysis.levels[0]
    assert level.ttft_ms.p95 < 1200  # the window is too short for the latency to break the limit
    assert level.status == "fail" and analysis.capacity.rate_rps is None, analysis.capacity
    assert not level.open_loop["server_kept_up"] and level.open_loop["keep_up_told"]
    check = next(c for c in level.checks if c.name == "sustained_rate")
    assert check.verdict == "fail" and check.value == pytest.approx(6.67, rel=0.05) and check.limit == 8.0
    for words in ("grew", "completed against", "sustains about 6.6", "grows without bound"):
        assert words in check.reason, check.reason
    assert "sustained_rate" not in {c.name for c in level.checks if c.verdict != "fail"}
    assert analysis.capacity.binding in ("sustained_rate",) and "queue grew" in analysis.capacity.message


def test_a_healthy_level_is_not_failed_by_the_queue_check():
    """Under what the server serves (6 req/s against 6.67), no queue grows: the level passes."""
    frame, run = _queued(6.0, 0.15, 6.0, warmup_s=1.0)
    analysis = analyze(frame, run, SloSpec.from_dict({"ttft_ms": {"p95": 1200}}))
    level = analysis.levels[0]
    assert level.status == "pass" and [c.name for c in level.checks] == ["ttft_ms.p95"]
    assert level.open_loop["server_kept_up"]


def test_the_autoscaling_target_rate_never_exceeds_the_sustainable_rate():
    """10.5 req/s to a server that serves 10 passes a 4 s level (its completions are 95% of the
    sends) while its queue grows: the target rate per replica is the sustainable 10 less the
    headroom, not 10.5 less it."""
    frame, run = _queued(10.5, 0.1, 4.0)
    analysis = analyze(frame, run, SloSpec.from_dict({"ttft_ms": {"p95": 1000}}))
    assert analysis.capacity.rate_rps == 10.5 and analysis.levels[0].status == "pass"
    scaling = analysis.autoscaling
    assert scaling.target_rate_rps_per_replica == pytest.approx(10.0 * (1 - scaling.headroom), rel=0.02)
    assert scaling.sustainable_rate_rps == pytest.approx(10.0, rel=0.02)
    assert "sustains about 10 req/s" in scaling.paragraph, scaling.paragraph


def test_a_reason_a_look_gave_says_it_was_the_looks_where_the_final_figures_differ():
    """The look counted the requests then in flight as waiting past the limit (+inf); the final row's
    p95 is finite. The reason says it was the look's, and ``why_final`` gives the final figures' one."""
    frame, run = _queued(8.0, 0.15, 4.5, warmup_s=1.0)
    look = "p95 TTFT is unbounded (more than 5% of requests failed or were cut after waiting past the limit) " \
           "against a 300 ms limit"
    run["levels"][0]["decision"] = {"verdict": "fail", "why": look, "check": "ttft_ms.p95", "ended": "decided_early"}
    run["levels"][0]["looks"] = [{"at_s": 3.5, "verdict": "fail", "why": look}]
    level = analyze(frame, run, SloSpec.from_dict({"ttft_ms": {"p95": 300}})).levels[0]
    assert np.isfinite(level.ttft_ms.p95)
    why = level.decision["why"]
    assert why.startswith("at the look at 3.5 s") and why.endswith(look), why
    assert level.decision["why_final"].startswith("p95 TTFT is ") and "unbounded" not in level.decision["why_final"]
    # where the final figures give the same reason, it is left as it was
    same = "every check passes"
    frame, run = _level(8.0, 3.0, 1.7)
    level = analyze(frame, run, SloSpec.from_dict({"itl_ms": {"p50": 22}})).levels[0]
    assert level.decision["why"] == same and level.decision["why_final"] == same


def test_what_the_server_sustains_comes_from_what_was_sent_not_the_nominal_rate():
    """A trial's seeded window sent 1.10 req/s at a nominal 2: the check said "0.73 req/s completed
    against 1.10 sent … the server sustains about 1.83 req/s", from the nominal rate. Here 8 req/s
    are sent at a level named 12 to a server that serves 6.67: it sustains 6.67, not 12 / 1.2 = 10."""
    frame, run = _queued(8.0, 0.15, 4.5, warmup_s=1.0)
    frame["rate_rps"] = 12.0
    run["levels"][0]["rate_rps"] = 12.0
    analysis = analyze(frame, run, SloSpec.from_dict({"ttft_ms": {"p95": 1200}}))
    check = next(c for c in analysis.levels[0].checks if c.name == "sustained_rate")
    assert check.value == pytest.approx(6.67, rel=0.05) and check.limit == 12.0, check
    assert check.ci[0] <= check.value <= check.ci[1] < 8.0
    assert "sustains about 6.6" in check.reason, check.reason


def test_the_reports_checks_table_gives_what_the_server_sustains_in_req_s():
    """report.html printed the sustained_rate check as shares ("295.28% … 800.00%") for 2.95 against 8 req/s."""
    from loadtest.report.sections import levels_table

    frame, run = _queued(8.0, 0.15, 4.5, warmup_s=1.0)
    analysis = analyze(frame, run, SloSpec.from_dict({"ttft_ms": {"p95": 1200}}))
    row = next(r for r in levels_table(analysis).split("</tr>") if ">sustained_rate<" in r)
    assert "req/s" in row and "%" not in row.split("</td>")[2], row
    assert ">8 req/s<" in row, row
