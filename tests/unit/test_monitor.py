"""The self-check from its samples: stamp-delay bounds, CPU, and the verdict-flip judgment.

The calibration against ground truth (the mock's own send stamps) is a
benchmark: benchmarks/bench_selfcheck.py.
"""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from loadtest.analysis import SloSpec, analyze
from loadtest.analysis.client_error import could_flip, delay_for_percentile, judge_client
from loadtest.analysis.results import Check
from loadtest.client.reader_health import ReaderHealth
from loadtest.load.monitor import merge_worker_health, stamp_delays, summarize
from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame
from test_analysis_capacity import sweep

CALM = np.full(100, 0.3)


def reader(waiting=(), ticks=(0.2,) * 50, woken=0, batches=(0.1,) * 50, tails=None) -> ReaderHealth:
    woken_tails = tails if tails is not None else (0.0,) * woken
    return ReaderHealth(array("d", batches), array("d", ticks), array("d", waiting), array("d", woken_tails), 0.1)


def test_calm_level_passes():
    health = summarize(CALM, reader(woken=200), cpu_pct=20, reader_busy_pct=10)
    assert health["saturated"] is False and health["reason"] is None
    assert health["itl_error_bound_ms"] < 0.5


def test_long_batches_delay_nothing_when_every_poll_waited_for_data():
    """The demo's case: long batches, but each step's tokens come tens of ms apart."""
    long_batches = reader(woken=500, batches=(3.0,) * 500)
    health = summarize(CALM, long_batches, 20, 10)
    assert health["reader_batch_p99_ms"] == 3.0
    assert health["stamp_delay_p99_ms"] < 0.5  # only wake-ups, not the batches, delay stamps


def test_data_already_waiting_is_bounded_by_the_time_since_the_last_poll():
    backlog = reader(waiting=(4.0,) * 100, woken=10)
    health = summarize(CALM, backlog, 20, 10)
    assert health["stamp_delay_p99_ms"] == 4.0 and health["itl_error_bound_ms"] == 4.0
    assert health["ttft_error_bound_ms"] == pytest.approx(4.0 + 0.3)  # the send side adds the event-loop lag


def test_woken_reads_add_their_tail_to_the_wake_up():
    """Greenlet reads (TLS): a read woken by a waiting poll is late by a wake-up plus its own tail."""
    wakes = (0.2,) * 99 + (3.0,)
    hub = reader(ticks=wakes, tails=(0.0,) * 99 + (1.5,))
    delays = stamp_delays(hub)
    # the largest tail meets the largest wake-up (the top of the wake-ups, spread over 100 reads)
    assert delays.max() == pytest.approx(1.5 + np.quantile(wakes, 0.995))
    assert np.median(delays) == pytest.approx(0.2)
    health = summarize(CALM, ReaderHealth(), 20, 0, greenlets=hub, greenlet_reads=True)
    assert health["reads"] == "greenlets" and health["stamp_delay_max_ms"] == pytest.approx(delays.max(), abs=1e-3)
    assert health["hub_wake_p99_ms"] == pytest.approx(np.percentile(wakes, 99), abs=1e-3)


def test_cpu_and_optional_hard_limits_flag_the_level():
    assert "CPU 95%" in summarize(CALM, reader(), 95, 10)["reason"]
    lag = np.concatenate([CALM, np.full(5, 9.0)])
    assert summarize(lag, reader(), 20, 10)["saturated"] is False  # no hard limit by default
    assert "event-loop lag p99" in summarize(lag, reader(), 20, 10, limits=(80, 2.5, None))["reason"]


def test_a_level_is_saturated_if_any_worker_was():
    calm = dict(summarize(CALM, reader(), 20, 10), worker="w1")
    busy = dict(summarize(CALM, reader(), 95, 10), worker="w2")
    merged = merge_worker_health([calm, busy])
    assert merged["saturated"] is True and merged["reason"].startswith("w2: CPU")
    assert merged["cpu_pct"] == 95 and len(merged["workers"]) == 2


def _check(metric, value, limit, verdict):
    return Check(f"{metric}.p95", metric, "p95", value, (value, value), limit, verdict, 100, False)


def test_a_verdict_can_flip_only_within_the_error_bound():
    assert could_flip(_check("itl_ms", 54.3, 55, "pass"), 2.1, inflate_only=False)
    assert could_flip(_check("itl_ms", 56.0, 55, "fail"), 2.1, inflate_only=False)
    assert not could_flip(_check("itl_ms", 50.0, 55, "pass"), 2.1, inflate_only=False)
    # the client only ever adds to TTFT: a pass stays a pass
    assert not could_flip(_check("ttft_ms", 199.0, 200, "pass"), 5.0, inflate_only=True)
    assert could_flip(_check("ttft_ms", 203.0, 200, "fail"), 5.0, inflate_only=True)


def test_the_analysis_flags_only_the_level_whose_verdict_the_error_could_move():
    analysis = sweep([1, 2, 4, 8], {"itl_ms": {"p95": 45}})
    level = analysis.level(4)
    check = level.check("itl_ms.p95")
    late = abs(check.value - 45) + 0.5
    level.client = {"stamp_delay_ms": {"0.5": 0.1, "0.99": late, "max": late}, "send_delay_ms": {"0.5": 0.1, "max": 0.2}}
    judge_client(level)
    assert level.client_saturated
    assert "the client's timing error bound is" in level.client["reason"] and "cannot be judged" in level.client["reason"]
    calm = analysis.level(1)
    calm.client = {"stamp_delay_ms": {"0.5": 0.1, "0.99": 0.3, "max": 0.4}, "send_delay_ms": {"0.5": 0.1, "max": 0.5}}
    assert not judge_client(calm).client_saturated



def test_a_level_that_fails_for_certain_elsewhere_is_judged_whatever_a_check_near_its_limit_reads():
    """A trial: chat TTFT p50 643 ms against 300 failed for certain, and an undecided ITL p95 within the
    client's 2.6 ms error of its limit made the level "cannot be judged". It fails on the TTFT alone."""
    quiet = {"stamp_delay_ms": {"0.5": 0.1, "0.975": 2.6, "max": 3.0}, "send_delay_ms": {"0.5": 0.1, "max": 0.2},
             "cpu_pct": 10.0}
    analysis = sweep([1, 2, 4, 8], {"itl_ms": {"p95": 45}})
    level = analysis.level(4)
    near = _check("itl_ms", 44.0, 45, "uncertain")
    level.checks = [near, _check("ttft_ms", 643.0, 300, "fail")]
    level.client = dict(quiet)
    assert not judge_client(level).client_saturated
    level.checks = [near, _check("ttft_ms", 290.0, 300, "pass")]  # nothing else decides it: the flag stands
    level.client = dict(quiet)
    assert judge_client(level).client_saturated and "cannot be judged" in level.client["reason"]
    busy = {**quiet, "saturated": True, "reason": "CPU 97%"}  # the self-check's own flag stays, whatever the verdicts
    level.checks, level.client, level.client_saturated = [near, _check("ttft_ms", 643.0, 300, "fail")], busy, False
    assert judge_client(level).client_saturated and level.client["reason"] == "CPU 97%"


def test_the_error_a_percentile_allows_for_grows_with_the_percentile():
    table = {"0.5": 0.1, "0.75": 0.2, "0.975": 3.0, "0.995": 9.0, "max": 20.0}
    assert delay_for_percentile(table, 0.5) == 0.2  # p50 allows for the p75 delay
    assert delay_for_percentile(table, 0.95) == 3.0  # p95 for the p97.5 delay
    assert delay_for_percentile(table, 0.99) == 9.0  # p99 for the p99.5 delay
    assert delay_for_percentile(table, 0.999) == 20.0  # beyond the table: its max


def _edge_run(client: dict):
    """Level 4's ITL p95 sits 0.5 ms under its 40.5 ms limit, and its client's stamps are late by up to 1 ms."""
    levels = level_plan([1, 2, 4, 8], 20.0)
    rows = []
    for lv in levels:
        c = lv["concurrency"]
        rows += closed_loop_rows(lv["index"], c, lv["start_wall"], 16.0, ttft_ms=100.0, itl_ms=10.0 * c, chunks=8)
        lv["client"] = {"stamp_delay_ms": {"0.5": 0.1, "0.99": 0.3, "max": 0.4}, "send_delay_ms": {"0.5": 0.1, "max": 0.5},
                        "cpu_pct": 5.0, "saturated": False, "reason": None}
        if c == 4:
            lv["client"] = client
    return analyze(to_frame(rows), run_dict(levels), SloSpec.from_dict({"itl_ms": {"p95": 40.5}}))


LATE_1MS = {"stamp_delay_ms": {"0.5": 0.1, "0.975": 1.0, "max": 1.2}, "send_delay_ms": {"0.5": 0.1, "max": 0.5}}


def test_a_quiet_client_whose_error_spans_the_limit_is_not_called_saturated():
    """The demo's case on a quiet host: 8% CPU, ITL p95 1 ms under its limit, stamps late by up to 1 ms.

    The level cannot be judged (client_saturated stays the flag), but the words say why: the
    verdict is within the client's timing error, the client was not busy, and more --workers
    (the saturated client's advice) would not narrow it."""
    analysis = _edge_run({**LATE_1MS, "cpu_pct": 8.0, "saturated": False, "reason": None})
    level = analysis.level(4)
    assert level.client_saturated and level.client_near_limit
    assert analysis.capacity.verdict == "client_saturated"
    assert analysis.capacity.message.startswith("At concurrency 4 a verdict is within the client's own timing error")
    assert "though the client was not busy" in analysis.capacity.message
    warning = next(w for w in analysis.warnings if "timing error" in w)
    assert "was not busy (at most 8% of a core)" in warning and "would not narrow" in warning
    assert not any("run it with --workers" in w for w in analysis.warnings)
    # summary.json says so (the gate reads it: compare/client_trust.py), and only at that level
    from loadtest.report.summary import summary_dict
    flags = {lv["concurrency"]: lv["client_near_limit"] for lv in summary_dict(analysis)["levels"]}
    assert flags == {1: False, 2: False, 4: True, 8: False}


def test_a_busy_client_near_the_limit_keeps_the_saturated_words_and_the_workers_advice():
    busy = {**LATE_1MS, "cpu_pct": 97.0, "saturated": True, "reason": "CPU 97% of a core"}
    analysis = _edge_run(busy)
    level = analysis.level(4)
    assert level.client_saturated and not level.client_near_limit
    assert analysis.capacity.message.startswith("The load generator was saturated at concurrency 4")
    assert any("run it with --workers" in w for w in analysis.warnings)


def test_a_client_at_two_thirds_of_a_core_is_not_called_quiet():
    """Not flagged by its own self-check (under 80%), but busy enough that its own work may be in the delay."""
    analysis = _edge_run({**LATE_1MS, "cpu_pct": 65.0, "saturated": False, "reason": None})
    assert analysis.level(4).client_saturated and not analysis.level(4).client_near_limit
    assert any("run it with --workers" in w for w in analysis.warnings)


def test_two_busy_levels_give_their_reason_once_with_both_levels_named():
    """The demo beside other work read "At concurrency 9, 10 the host was busy (…98%…14%…89%…): …; the
    host was busy (…98%…14%…91%…): …", the whole reason twice for two levels that differed only in figures."""
    levels = level_plan([1, 2, 4, 8], 20.0)
    rows = []
    for lv in levels:
        c = lv["concurrency"]
        rows += closed_loop_rows(lv["index"], c, lv["start_wall"], 16.0, ttft_ms=100.0, itl_ms=10.0 * c, chunks=8)
        lv["client"] = {"stamp_delay_ms": {"0.5": 0.1, "max": 0.4}, "send_delay_ms": {"0.5": 0.1, "max": 0.5},
                        "cpu_pct": 4.0, "saturated": False, "reason": None}
        if c >= 4:  # the host busy, the client idle: figures differ from level to level
            lv["client"].update(saturated=True, host_cores=2, host_others_pct=90.0 + c, host_cpu_pressure_pct=80.0 + c,
                                client_run_delay_pct=10.0 + c)
    analysis = analyze(to_frame(rows), run_dict(levels), SloSpec.from_dict({"itl_ms": {"p95": 1000}}))
    assert analysis.capacity.verdict == "host_contended"
    message = analysis.capacity.message
    assert message.count("the host was busy") == 1 and "alike at 8" in message, message
    warning = next(w for w in analysis.warnings if "host_contended" in w)
    assert warning.count("other processes used") == 1 and "alike at 8" in warning, warning
