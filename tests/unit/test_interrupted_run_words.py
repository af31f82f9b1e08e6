"""A run stopped by Ctrl-C, SIGTERM or the web UI's Stop blames the stop, not the limits.

From a user trial: a run interrupted 2.4 s into its level of 8 users (TTFT p95 49.5 ms against
500) read "Not decided: some levels were too close to their limits to call with confidence" and
"Longer levels (load.max_level_duration_s) can decide it", and its warning "the run did not
complete (interrupted?)", though run.json could have said who stopped it (``stopped_by``).
"""

from __future__ import annotations

import pytest

from loadtest.analysis import SloSpec, analyze
from loadtest.report.html import plain_verdict
from loadtest.report.summary import summary_dict
from loadtest.run_record import RunRecord
from support.synthetic import T0, request_row, run_dict, to_frame

pytestmark = pytest.mark.unit

SLO = {"ttft_ms": {"p95": 500}}


def _levels(last_decision: dict) -> list[dict]:
    """A level of 4 users decided early (pass), then one of 8 users that ran 2.4 s."""
    client = {"loop_lag_p99_ms": 0.5, "loop_lag_max_ms": 2.0, "cpu_pct": 10.0, "saturated": False, "reason": None}
    return [
        {"index": 0, "concurrency": 4, "start_wall": T0, "end_wall": T0 + 10.0, "refine": False, "client": client,
         "decision": {"verdict": "pass", "ended": "decided_early", "ran_s": 10.0, "looks": 1}},
        {"index": 1, "concurrency": 8, "start_wall": T0 + 10.0, "end_wall": T0 + 12.4, "refine": False,
         "client": client, "decision": last_decision},
    ]


def _run(last_decision: dict | None = None, **stop) -> dict:
    """The run: 40 requests at 4 users, 8 at 8 users (too few to decide a p95: uncertain)."""
    rows = [request_row(request_id=f"a{i}", level=4, level_index=0, start_wall=T0 + 0.2 * i,
                        chunk_ms=[25.0 + i % 5, 40.0]) for i in range(40)]
    rows += [request_row(request_id=f"b{i}", level=8, level_index=1, start_wall=T0 + 10.0 + 0.2 * i,
                         chunk_ms=[45.0 + i % 5, 60.0]) for i in range(8)]
    run = run_dict(_levels({} if last_decision is None else last_decision))
    run.update(complete=False, **stop)
    return {"frame": to_frame(rows), "run": run}


def _analyze(run: dict):
    analysis = analyze(run["frame"], run["run"], SloSpec.from_dict(SLO))
    assert analysis.capacity.verdict == "uncertain" and analysis.level(8).status == "uncertain"  # the premise
    return analysis


def test_a_level_cut_short_by_an_interrupt_says_so():
    analysis = _analyze(_run(stopped_by="signal", stop_signal="SIGINT"))
    message = analysis.capacity.message
    assert "because an interrupt (SIGINT) stopped the run 2.4 s into its level of 8 concurrent users, " \
           "before a look could decide it: at 8 the p95 TTFT" in message, message
    assert message.endswith("A run left to finish that level can decide it."), message
    assert "Longer levels" not in message
    headline = plain_verdict(analysis)
    assert headline.startswith("Not decided: an interrupt (SIGINT) stopped the run while a level was still being "
                               "measured"), headline
    assert "too close to their limits" not in headline
    incomplete = [w for w in analysis.warnings if "did not complete" in w]
    assert incomplete == ["the run did not complete: an interrupt (SIGINT) stopped it 2.4 s into its last level, "
                          "which was cut short before it could be decided; every record measured until then is kept"]
    summary = summary_dict(analysis)
    assert summary["capacity"]["message"] == message
    assert (summary["run"]["stopped_by"], summary["run"]["stop_signal"]) == ("signal", "SIGINT")


def test_sigterm_and_the_web_ui_stop_are_named():
    assert "because SIGTERM stopped the run" in _analyze(_run(stopped_by="signal", stop_signal="SIGTERM")).capacity.message
    web = _analyze(_run(stopped_by="web_ui"))
    assert "because the web UI's Stop stopped the run" in web.capacity.message
    assert any(w.startswith("the run did not complete: the web UI's Stop stopped it 2.4 s") for w in web.warnings)


def test_a_level_undecided_at_its_last_look_keeps_the_limits_words_though_the_run_was_stopped():
    """Stopped during the hold of a level that its last look left undecided: the stop did not cut it short."""
    undecided = {"verdict": "uncertain", "ended": "undecided_at_max", "ran_s": 2.4, "looks": 3}
    analysis = _analyze(_run(undecided, stopped_by="signal", stop_signal="SIGINT"))
    assert "Longer levels (load.max_level_duration_s) can decide it." in analysis.capacity.message
    assert "too close to their limits" in plain_verdict(analysis)
    assert any("stopped it after its last level had ended" in w for w in analysis.warnings), analysis.warnings


def test_an_older_run_json_that_did_not_say_who_stopped_it_is_not_a_question():
    analysis = _analyze(_run())
    assert not any("interrupted?" in w for w in analysis.warnings), analysis.warnings
    assert any("it was stopped early (Ctrl-C, SIGTERM or the web UI's Stop; this run.json does not say which)" in w
               for w in analysis.warnings), analysis.warnings
    assert "Longer levels" in analysis.capacity.message  # nothing says it was cut short: the words it had


def test_run_json_keeps_the_signal():
    record = RunRecord(stopped_by="signal", stop_signal="SIGTERM")
    again = RunRecord.from_json(record.to_json())
    assert (again.stopped_by, again.stop_signal) == ("signal", "SIGTERM")
    assert RunRecord.from_json({"name": "older"}).stop_signal is None
