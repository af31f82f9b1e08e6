"""A target that stops answering mid-run is an outage in the verdict's words, not a capacity.

A trial killed llama-server 2 s into the second level: every request after that was refused
(``connect``) or cut (``disconnect``), all counted, and the run said "This endpoint holds 1
concurrent user within the SLOs; at 2 the p95 TTFT is unbounded …", exit 0, with autoscaling
advice. The records here are synthetic (tests/support/synthetic.py), analyzed by the real pipeline.
"""

from __future__ import annotations

from support.synthetic import closed_loop_rows, failed_row, level_plan, run_dict, to_frame

from loadtest.analysis import analyze
from loadtest.analysis.slo import SloSpec
from loadtest.report.summary import summary_dict

SLO = {"ttft_ms": {"p95": 1000}, "max_error_rate": 0.01}


def _run(kind: str = "connect", dies_at_s: float | None = 2.0, comes_back: bool = False, n_after: int = 20,
         first_kind: str | None = None, first_n: int = 0, after_load: dict | None = None, hung: int = 0,
         **failed: object):
    plan = level_plan([1, 2], 8.0)
    rows = closed_loop_rows(0, 1, plan[0]["start_wall"], 8.0, seed=1)
    live = closed_loop_rows(1, 2, plan[1]["start_wall"], 8.0, seed=2)
    if dies_at_s is None:
        rows += live
    else:
        death = plan[1]["start_wall"] + dies_at_s
        rows += [r for r in live if r["start_wall"] + r["e2e_ms"] / 1000 < death]
        step = (8.0 - dies_at_s - 0.5) / n_after
        for i in range(n_after):
            t = death + i * step
            this = first_kind if first_kind is not None and i < first_n else kind  # e.g. 503s before the refusals
            rows.append(failed_row(this, e2e_ms=2.0, request_id=f"lost-{i}", user=i % 2, level=2, level_index=1,
                                   start_wall=t, **failed))
        for i in range(hung):  # streams in flight at the death, left hanging: they run into the 30 s timeout
            rows.append(failed_row("timeout", e2e_ms=30_000.0, status=200, ttfb_ms=5.0, request_id=f"hung-{i}",
                                   user=i % 2, level=2, level_index=1, start_wall=death - 0.2 - 0.01 * i))
        if comes_back:  # the server restarted: answers again before the level's end
            rows += [r for r in live if r["start_wall"] > death + step * n_after]
    run = run_dict(plan, slo=SLO)
    if after_load is not None:
        run["after_load"] = after_load
    return analyze(to_frame(rows), run, SloSpec.from_dict(SLO), resamples=200)


def test_a_target_that_stopped_answering_is_said_to_have_and_its_capacity_is_a_lower_bound():
    analysis = _run()
    lost = analysis.target_lost
    assert lost is not None and lost.kinds == {"connect": 20} and lost.requests == 20
    assert lost.level_index == 1 and abs(lost.seconds_into_level - 2.0) < 0.3
    message = analysis.capacity.message
    assert message.startswith("The target stopped answering 2.") and "into the level of 2 concurrent users" in message
    assert "Before it, the endpoint held 1 concurrent user within the SLOs: a lower bound" in message
    assert "p95 TTFT is unbounded" not in message  # the load's words for the outage's effect
    assert analysis.warnings[0].startswith("the target stopped answering")
    summary = summary_dict(analysis)
    assert summary["target_lost"]["requests"] == 20 and summary["target_lost"]["level_index"] == 1
    assert summary["capacity"]["concurrency"] == 1  # what held before it stays, as the lower bound


def test_a_server_that_answers_to_the_end_or_comes_back_is_not_lost():
    assert _run(dies_at_s=None).target_lost is None
    back = _run(comes_back=True, n_after=10)
    assert back.target_lost is None  # an outage the error budget judges, not the end of the target
    assert "held" not in back.capacity.message


def test_a_live_servers_answers_are_never_an_outage():
    # timeouts and 5xx come from a server that is there; a handful of refusals is not an outage either
    assert _run(kind="timeout").target_lost is None
    assert _run(kind="http_5xx").target_lost is None
    assert _run(n_after=4).target_lost is None
    # cut streams alone: a proxy's read timeout on a live server's queued streams, not a dead server (a review);
    # they were cut after the response head (its status and first byte came)
    assert _run(kind="disconnect", status=200, ttfb_ms=1.0).target_lost is None


def test_a_dead_server_behind_a_tunnel_closes_every_connection_unanswered_and_is_lost():
    # ssh -L or socat to a dead server: each connection is made, then closed before any response byte. The
    # client calls that a disconnect (the connection was made); it is no cut stream, and the run lost its target
    lost = _run(kind="disconnect", status=0).target_lost
    assert lost is not None and lost.kinds == {"disconnect": 20} and lost.requests == 20


def test_a_server_shutting_down_gracefully_answers_503_then_refuses_and_is_lost():
    # its 503s are a live server's answers; the streak of refusals after them is the outage (a review: one
    # 503 after the last success vetoed the detection, and a dead server read as a capacity with exit 0)
    lost = _run(first_kind="http_5xx", first_n=3).target_lost
    assert lost is not None and lost.kinds == {"connect": 17} and lost.requests == 17


def test_a_server_killed_just_before_the_deciding_look_is_lost_when_it_still_answers_nothing_after_the_load():
    """The streak of a server killed a moment before the look that ended its level is shorter than half
    a second: from the records alone, a live overloaded server's last-instant refusals look the same,
    and the run read "holds 1 user" off a dead server. The request sent once the load had ended
    (run.json's ``after_load``) tells them apart: still nothing is an outage, an answer is not."""
    short = dict(dies_at_s=7.3, n_after=20)  # 20 refusals over 0.19 s, then the level's end
    assert _run(**short).target_lost is None  # no request after the load: the records alone cannot tell
    gone = {"at_wall": 2e9, "answered": False, "ok": False, "error_kind": "connect", "status": None}
    analysis = _run(**short, after_load=gone)
    lost = analysis.target_lost
    assert lost is not None and lost.requests == 20 and lost.confirmed_after_load is True
    assert analysis.capacity.message.startswith("The target stopped answering 7.")
    assert "nor did the one sent after the load" in analysis.warnings[0]
    assert summary_dict(analysis)["target_lost"]["confirmed_after_load"] is True
    there = {"at_wall": 2e9, "answered": True, "ok": True, "error_kind": None, "status": 200}
    assert _run(**short, after_load=there).target_lost is None  # it answered: the refusals were a live server's
    # a connection taken and held past the timeout is no refusal: something is there (a server still starting)
    held = {"at_wall": 2e9, "answered": False, "ok": False, "error_kind": "timeout", "status": None}
    assert _run(**short, after_load=held).target_lost is None
    # a streak long enough on its own is an outage whatever came after (a restarted server answers the request)
    assert _run(after_load=there).target_lost.confirmed_after_load is False


def test_a_server_that_left_its_streams_hanging_when_it_went_is_lost():
    """llama-server on SIGTERM refuses new connections, and the streams it had open run into the
    client's 30 s timeout: those end after every refusal that followed them, and ordered by end
    they broke the closing streak (a trial's killed server read "at 4 req/s the error budget is
    spent", exit 0). Ordered by send, the refusals close the run."""
    lost = _run(hung=3).target_lost
    assert lost is not None and lost.kinds == {"connect": 20} and lost.requests == 20
    # a live server's timeouts sent last still close it: no outage
    assert _run(kind="timeout").target_lost is None
