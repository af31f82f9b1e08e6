"""The terminal's live view: honest "remaining" for levels that end once decided, plain lines off a terminal."""

from __future__ import annotations

import io
import math

import gevent
import numpy as np
import pyarrow as pa
from rich.console import Console

from loadtest.quantiles import quantile_sorted
from loadtest.export.live import _itl_seconds
from loadtest.load.live import LiveView, remaining_text
from loadtest.load.progress import RunProgress, quantiles_with_failures
from loadtest.metric_registry import PERCENTILES


def test_remaining_names_the_next_look_and_the_longest_the_level_can_run():
    looks = [2.0, 4.0, 8.0, 16.0]
    assert remaining_text(1.0, looks) == "next look in 1 s (ends then if decided), at most 15 s left"
    assert remaining_text(5.0, looks) == "next look in 3 s (ends then if decided), at most 11 s left"
    assert remaining_text(9.0, looks) == "at most 7 s left (last look)"
    assert remaining_text(16.5, looks) == "judging the last look now"
    # a fixed-length level (min = max): one look, which is also the end
    assert remaining_text(1.0, [30.0]) == "at most 29 s left (last look)"


def _records(level_index: int, level: int, n: int, errors: int = 0) -> pa.Table:
    return pa.table({
        "level_index": [level_index] * n,
        "level": [level] * n,
        "error_kind": [None] * (n - errors) + ["http_5xx"] * errors,
        "ok": [True] * (n - errors) + [False] * errors,
        "warmup": [False] * n,
        "ttft_ms": [20.0] * n,
        "chunk_ms": [[20.0, 30.0, 40.0]] * n,
    })


def test_off_a_terminal_each_level_gets_plain_lines_with_requests_so_far():
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    assert not console.is_terminal
    progress = RunProgress()
    live = LiveView(progress, console, looks=[2.0, 4.0, 8.0])
    live.start()
    try:
        live.level_started(0, 4)
        progress.update(_records(0, 4, 12, errors=2))
        line = live.running_line()
        assert line.startswith("level 1 (4 users): ")
        assert "next look in" in line and "at most" in line and "12 requests so far (2 errors: http_5xx 2)" in line
        live.level_ended(0, {"ended": "decided_early", "verdict": "pass", "ran_s": 2.1})
        assert live.current is None and live.running_line() is None
    finally:
        live.stop()
    text = out.getvalue()
    assert "level 1 (4 users): started, next look in 2 s" in text  # printed as it started
    assert "level 1: 4 users, 12 requests, 2 errors" in text and "ran 2.1 s, pass, decided early" in text
    assert "\x1b[" not in text and "━" not in text  # plain text for CI logs: no bar, no escape codes


def test_on_a_terminal_the_level_in_force_has_a_bar_against_its_longest_length():
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=True, force_interactive=True, color_system="standard")
    progress = RunProgress()
    live = LiveView(progress, console, looks=[2.0, 4.0, 8.0])
    live.start()
    try:
        live.level_started(2, 16, refine=True)
        progress.update(_records(2, 16, 30))
        live._live.update(live._render(), refresh=True)
    finally:
        live.stop()
    text = out.getvalue()
    assert "━" in text  # rich's progress bar
    assert "level 3 (16 users, refine):" in text and "30 requests so far" in text


def test_an_answer_that_is_not_streamed_shows_e2e_and_items_per_second():
    """Embeddings (rerank, score) have no first token: the line shows e2e p95 and items/s, not "TTFT p95 -".

    10 requests of 4 inputs each, 100 ms apiece, back to back over 1 s: 40 items in 1.0 s."""
    n = 10
    table = pa.table({
        "level_index": [0] * n, "level": [2] * n, "error_kind": [None] * n, "ok": [True] * n,
        "warmup": [False] * n, "ttft_ms": [None] * n, "chunk_ms": [[]] * n,
        "e2e_ms": [100.0] * n, "items": [4] * n, "start_wall": [1000.0 + 0.1 * i for i in range(n)],
    })
    progress = RunProgress()
    progress.update(table)
    out = io.StringIO()
    live = LiveView(progress, Console(file=out, width=200, color_system=None), looks=[2.0], unary=True)
    live.level_ended(0, {"ended": "decided", "verdict": "pass", "ran_s": 2.0})
    line = out.getvalue()
    assert "level 1: 2 users, 10 requests, 0 errors, e2e p95 100.0 ms, 40.0 items/s" in line, line
    assert "TTFT" not in line and "TTFT" not in str(live._table().columns[4].header)


def test_the_live_itl_is_per_token_as_the_final_tables_is():
    """A server that sends 2 tokens a chunk 40 ms apart: the live ITL reads 20 ms a token, not 40.

    The analysis spreads a chunk's gap over its tokens (analysis/chunks.py); the live view
    once showed the raw gap, twice the final table's figure on such a server.
    """
    n = 10
    table = _records(0, 4, n).append_column("chunk_tokens", pa.array([[2, 2, 2, 2]] * n))
    table = table.set_column(table.column_names.index("chunk_ms"), "chunk_ms", pa.array([[20.0, 60.0, 100.0, 140.0]] * n))
    progress = RunProgress()
    progress.update(table)
    level = progress.levels[0]
    assert list(level.itl) == [20.0] * (3 * 2 * n)
    # one token a chunk (or no token counts): the gap itself
    progress = RunProgress()
    progress.update(_records(0, 4, n))
    assert list(progress.levels[0].itl) == [10.0] * (2 * n)


def test_the_exported_itl_histogram_is_per_token_too():
    """loadtest_itl_seconds (export/live.py) counts the same per-token gaps as the live view."""
    n = 4
    table = _records(0, 4, n).append_column("chunk_tokens", pa.array([[2, 2, 2, 2]] * n))
    table = table.set_column(table.column_names.index("chunk_ms"), "chunk_ms", pa.array([[20.0, 60.0, 100.0, 140.0]] * n))
    seconds, owners = _itl_seconds(table, np.array([1, 3]))
    assert seconds.tolist() == [0.02] * 12 and owners.tolist() == [1] * 6 + [3] * 6


def test_an_open_loop_level_is_named_by_its_rate_and_a_trace_replay_level_by_its_speedup():
    """A --rates run once read "level 1 (0 users)": an open-loop level has no users, it has a rate."""
    out = io.StringIO()
    progress = RunProgress()
    live = LiveView(progress, Console(file=out, width=200, color_system=None), looks=[2.0, 4.0])
    live.level_started(0, 0, rate_rps=4.0)
    table = _records(0, 0, 5).append_column("rate_rps", pa.array([4.0] * 5))
    progress.update(table)
    assert live.running_line().startswith("level 1 (4 req/s): ")
    live.level_ended(0, {"ended": "decided", "verdict": "pass", "ran_s": 4.0})
    assert "level 1: 4 req/s, 5 requests" in out.getvalue()
    # trace replay: a window of mean rate 2 req/s replayed at 4 req/s is 2× the window
    out = io.StringIO()
    live = LiveView(progress, Console(file=out, width=200, color_system=None), looks=[2.0, 4.0], trace_rate_rps=2.0)
    live.level_started(0, 0, refine=True, rate_rps=4.0)
    assert live.running_line().startswith("level 1 (2× the trace window, refine): ")
    live.level_ended(0, {"ended": "decided", "verdict": "pass", "ran_s": 4.0})
    assert "level 1: 2× the trace window, 5 requests" in out.getvalue()
    assert "users" not in out.getvalue()


def test_the_live_figures_count_and_time_requests_as_the_final_table_does():
    """A level's line once read "29 requests, TTFT p95 29.0 ms" where the table read 23 and ∞.

    The table (analysis/frame.py, metrics.py) counts the requests started in the measured window:
    not in the warm-up, not in the hold after the window's end, not cancelled by the harness; and a
    failure enters TTFT as +inf. Here: 20 measured successes, 3 measured failures, 2 warm-up, 3 started
    in the hold, 1 cancelled: 23 requests, 3 errors, and the p95 of 23 TTFTs with 3 infinite is ∞.
    """
    kinds = [None] * 20 + ["timeout"] * 3 + [None] * 2 + [None] * 3 + ["cancelled"]
    n = len(kinds)
    table = pa.table({
        "level_index": [0] * n, "level": [4] * n, "error_kind": kinds,
        "ok": [k is None for k in kinds],
        "warmup": [False] * 23 + [True] * 2 + [False] * 4,
        "ttft_ms": [29.0] * 20 + [None] * 3 + [5.0] * 2 + [5.0] * 3 + [None],
        "chunk_ms": [[29.0, 39.0]] * n, "e2e_ms": [40.0] * n,
        "start_wall": [100.0] * 23 + [99.0] * 2 + [111.0] * 3 + [105.0],
    })
    progress = RunProgress()
    progress.update(table, {0: 110.0})  # the window ended at 110: the hold's requests started after it
    level = progress.levels[0]
    assert (level.requests, level.errors) == (23, 3)
    assert level.p95()[0] == math.inf
    out = io.StringIO()
    live = LiveView(progress, Console(file=out, width=200, color_system=None))
    live.level_ended(0)
    assert "level 1: 4 users, 23 requests, 3 errors (timeout 3), TTFT p95 ∞ ms" in out.getvalue()
    # no failures: the successes' own p95, measured only (not the warm-up's or the hold's 5 ms)
    progress = RunProgress()
    progress.update(table.slice(0, 20), {0: 110.0})
    assert progress.levels[0].p95()[0] == 29.0


def test_an_open_loop_requests_live_ttft_counts_from_its_scheduled_time():
    """Open loop, a request sent 50 ms late waited 50 ms more: the table counts it, so does the live line."""
    table = _records(0, 0, 4).append_column("schedule_lag_ms", pa.array([50.0] * 4))
    progress = RunProgress()
    progress.update(table)
    assert list(progress.levels[0].ttft) == [70.0] * 4


def test_the_live_percentiles_are_the_analysis_percentiles_with_failures_as_infinity():
    """The writer process does not import the analysis (pandas at its start): its copy must agree."""
    rng = np.random.default_rng(7)
    for n, failures in [(1, 0), (1, 1), (19, 1), (20, 1), (21, 2), (100, 5), (101, 1), (997, 60)]:
        values = np.concatenate([rng.exponential(30.0, n - failures), np.full(failures, np.inf)])
        rng.shuffle(values)
        got = quantiles_with_failures(values)
        ordered = np.sort(values)
        assert got == {name: quantile_sorted(ordered, q) for name, q in PERCENTILES.items()}, (n, failures)


def test_a_level_in_its_hold_says_so_not_the_looks_that_no_longer_come():
    """From a user trial: a level decided after 6.6 s and held 3.9 s for its requests printed
    "10 s elapsed, next look in 10 s (ends then if decided), at most 30 s left"."""
    import time

    from loadtest.load.hold import Hold
    from loadtest.load.levels import LevelSpan

    progress = RunProgress()
    live = LiveView(progress, Console(file=io.StringIO(), width=200, color_system=None), looks=[4.0, 8.0, 20.0, 40.0])
    span = LevelSpan(index=1, concurrency=8, start_wall=time.time() - 10.5)
    live.level_started(1, 8, span=span)
    progress.update(_records(1, 8, 150))
    assert "next look in" in live.running_line()  # while its window runs: the looks
    # a look decides it at 6.6 s; its window ends there, and its hold waits for 7 measured requests
    span.decision = {"verdict": "pass", "ended": "decided_early", "ran_s": 6.6}
    span.end_wall = span.start_wall + 6.6
    running = iter([7, 5, 0])
    hold = Hold(span, lambda _span: next(running), cap_s=30.0)
    line = live.running_line()
    assert line.startswith("level 2 (8 users): decided pass at 6.6 s; holding its load until its 7 measured "
                           "requests finish (3."), line
    assert line.endswith("s so far), 150 requests measured (0 errors)"), line
    assert "next look" not in line and "at most" not in line and "elapsed" not in line
    assert not hold.over() and "until its 5 measured requests finish" in live.running_line()
    assert hold.over()  # drained: the hold is written to run.json, and the span is no longer holding
    assert span.holding is None and "holding" not in (live.running_line() or "")


def test_a_level_held_after_its_last_look_or_its_duration_says_how_its_window_ended():
    from loadtest.load.live import hold_text

    assert hold_text({"ended": "undecided_at_max", "verdict": "uncertain", "ran_s": 40.1}, 1, 2.0) == (
        "still undecided at its last look at 40.1 s; holding its load until its 1 measured request finishes (2.0 s so far)"
    )
    assert hold_text({"ended": "duration", "ran_s": 6.0}, 3, 0.4).startswith("window ended at 6.0 s; holding")
    assert hold_text({"ended": "decided_after_extension", "verdict": "fail", "ran_s": 16.1}, 2, 4.0).startswith(
        "decided fail at 16.1 s; holding its load until its 2 measured requests finish")


def test_a_levels_closing_line_waits_for_its_last_records_and_comes_before_the_next_levels():
    """A trial read "level 1: 1 user, 87 requests" against the final table's 88, and an open-loop
    TTFT p95 of 2618 ms against 2,881: the line went out right after the last flush, before the
    record writer's figures for the requests that ended last came back. It now waits for them
    (``settle``), off the load's tick, and the next level's first line follows it."""
    from loadtest.load.levels import LevelSpan

    out = io.StringIO()
    progress = RunProgress()
    live = LiveView(progress, Console(file=out, width=200, color_system=None), looks=[2.0])
    first = LevelSpan(index=0, concurrency=1, start_wall=100.0)
    first.decision = {"ended": "decided", "verdict": "pass", "ran_s": 2.0}
    second = LevelSpan(index=1, concurrency=4, start_wall=102.5)
    live.level_changed(None, first)
    progress.update(_records(0, 1, 87))  # what the writer had counted when the hold ended

    def settle() -> None:  # its answer for the last flush: the request that ended last
        gevent.sleep(0.05)
        progress.update(_records(0, 1, 1))

    frozen: list[int] = []
    live.level_changed(first, second, settle=settle, frozen=frozen.append)
    assert live.current is not None and live.current.index == 1  # the next level is in force at once
    live.stop()
    text = out.getvalue()
    assert "level 1: 1 user, 88 requests, 0 errors" in text, text
    assert text.index("level 1: 1 user, 88 requests") < text.index("level 2 (4 users): started"), text
    assert frozen == [0]


def test_the_errors_are_named_by_kind_in_the_live_lines_and_carried_by_the_writers_figures():
    """A live line said "1061 requests so far (1061 errors)" and nothing of why; the kinds come with the count."""
    from loadtest.load.live import progress_line
    from loadtest.load.progress import LevelFigures, LevelProgress, errors_text

    progress = RunProgress()
    table = _records(0, 4, 10, errors=3)
    kinds = table["error_kind"].to_pylist()
    kinds[-1] = "timeout"
    kinds[-2] = None  # a failure without a kind: "unknown", as the analysis says
    table = table.set_column(table.column_names.index("error_kind"), "error_kind", pa.array(kinds, pa.string()))
    progress.update(table)
    p = dict(progress.snapshot())[0]
    assert (p.errors, dict(p.error_kinds)) == (3, {"http_5xx": 1, "timeout": 1, "unknown": 1})
    line = progress_line(0, p)
    assert "10 requests, 3 errors (http_5xx 1, timeout 1, unknown 1), TTFT p95" in line, line
    # what the record writer reports is what the timing process shows, and a resumed level goes on counting
    figures = LevelFigures(p.figures())
    assert progress_line(0, figures) == line
    resumed = LevelProgress.resumed(figures)
    assert dict(resumed.error_kinds) == {"http_5xx": 1, "timeout": 1, "unknown": 1}
    assert errors_text(0, {}) == "0 errors" and errors_text(1, {"timeout": 1}) == "1 error (timeout 1)"
    assert errors_text(5, {"a": 2, "b": 1, "c": 1, "d": 1}, joined=": ") == "5 errors: a 2, b 1, c 1, …"
