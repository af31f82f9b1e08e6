"""Open loop at the rate a level's window was actually offered, and a "!" the server's own waiting count denies.

A trial against llama-server (3-4 s windows, Poisson arrivals):

* ``--refine`` printed "holds 11 req/s" where the "11" level's window had been offered 9.9 req/s
  (the "10" probe 6.7, less than the "8" level), stepping by 0.5 req/s against a noise of ±1.9;
  ``capacity.rate_rps`` and the autoscaling target used the nominal rate, and nothing said so;
* a trace replay marked its capacity level "!" (the server could not keep up) while the server's
  waiting gauge read 0 in every scrape, its TTFT p95 93 ms against 500.

The records are made here, from servers whose every request is known.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from loadtest.analysis import analyze
from loadtest.analysis.refine import next_refine_rate
from loadtest.analysis.slo import SloSpec
from loadtest.report.summary import summary_dict
from loadtest.report.terminal import print_summary

T0 = 1000.0
SLO = SloSpec.from_dict({"ttft_ms": {"p95": 500}, "max_error_rate": 0.5})


def _frame(index: int, rate: float, sends: np.ndarray, life_s: np.ndarray | float, ttft_ms: float = 20.0) -> pd.DataFrame:
    n = len(sends)
    e2e = np.broadcast_to(np.asarray(life_s, dtype=float) * 1000.0, (n,)).copy()
    return pd.DataFrame({
        "request_id": [f"l{index}-{i}" for i in range(n)], "worker": "local", "user": 0, "level": 0,
        "level_index": index, "warmup": False, "start_wall": sends, "ttfb_ms": ttft_ms, "ttft_ms": ttft_ms,
        "e2e_ms": e2e, "chunk_ms": [[ttft_ms, e] for e in e2e], "chunk_tokens": [[1, 1]] * n,
        "completion_tokens": 2, "token_source": "usage", "status": 200, "ok": True, "error_kind": None,
        "error": None, "rate_rps": rate, "scheduled_wall": sends, "schedule_lag_ms": 0.0,
    })


def _level(index: int, rate: float, start: float, end: float, hold_end: float, warmup_s: float) -> dict:
    return {"index": index, "concurrency": 0, "start_wall": start, "end_wall": end, "rate_rps": rate,
            "hold": {"start_wall": end, "end_wall": hold_end, "ended": "drained", "censored": 0, "cap_s": 30.0}}


# -- the rate a window was offered --------------------------------------------------------------------


def _short_windows(offered_at_10: float = 7.0, window_s: float = 5.0):
    """A "10 req/s" level whose 5 s window was offered ``offered_at_10`` req/s (the draw of a short
    window), passing, and a 20 req/s level that fails; constant sends, 0.2 s requests."""
    warmup = 1.0
    frames, levels = [], []
    for index, (rate, offered, ttft, start) in enumerate(((10.0, offered_at_10, 20.0, T0), (20.0, 20.0, 900.0, T0 + 20))):
        end = start + warmup + window_s
        sends = start + np.arange(0.0, warmup + window_s + 0.2, 1.0 / offered)
        frames.append(_frame(index, rate, sends, 0.2 + ttft / 1000.0, ttft_ms=ttft))
        levels.append(_level(index, rate, start, end, end + 1.2, warmup))
    run = {"warmup_s": warmup, "ended_wall": T0 + 40.0, "levels": levels,
           "scenario": {"load": {"arrival": "poisson", "rates": [10.0, 20.0]}}}
    return pd.concat(frames, ignore_index=True), run


def test_the_capacity_names_the_rate_its_window_was_offered_and_the_target_rests_on_no_more():
    """Nominal 10 req/s, offered 7 in its window: capacity.rate_rps stays 10, the sentence and
    summary.json give 7, and the autoscaling target is 7 less the headroom (it was 10 less it)."""
    frame, run = _short_windows(7.0)
    analysis = analyze(frame, run, SLO, resamples=50)
    cap = analysis.capacity
    assert (cap.rate_rps, cap.first_failing_rate_rps) == (10.0, 20.0), cap
    sent = analysis.levels[0].open_loop["sent_rps"]
    assert sent == pytest.approx(7.0, rel=0.03)
    scaling = analysis.autoscaling
    assert scaling.target_rate_rps_per_replica == pytest.approx(sent * (1 - scaling.headroom), rel=0.01)
    assert "received 7 req/s, not 10" in scaling.paragraph, scaling.paragraph
    assert "holds 10 req/s (its 5.0 s window was offered 7 req/s) within the SLOs" in cap.message, cap.message
    assert cap.offered_rate_rps == pytest.approx(7.0, rel=0.03) and cap.sent_rate_rps == pytest.approx(sent)
    summary = summary_dict(analysis)["capacity"]
    assert summary["rate_rps"] == 10.0 and summary["offered_rate_rps"] == pytest.approx(7.0, rel=0.03)


def test_a_deciding_level_offered_beyond_its_windows_noise_is_a_warning_with_the_length_that_fixes_it():
    """7 req/s offered against 10 in a 5 s window is 3 req/s off where the window varies by ±1.4 (1 sd):
    warned, with levels long enough to hold the offered rate within 5% (40 s windows at 10 req/s).
    9.5 offered is within the noise: the sentence gives it, no warning."""
    warned = analyze(*_short_windows(7.0), SLO, resamples=50).warnings
    said = [w for w in warned if "the verdict there is evidence about the rate offered" in w]
    assert len(said) == 1 and "offered 7 req/s (-30%" in said[0] and "±1.4 req/s" in said[0], warned
    assert "load.min_level_duration_s of at least 41 s" in said[0], said[0]
    # the schedule is seeded: the same short draw comes back every run (trial F: -46% in every nightly)
    assert "every run with the same seed draws this window again" in said[0], said[0]
    quiet = analyze(*_short_windows(9.5), SLO, resamples=50)
    assert not [w for w in quiet.warnings if "evidence about the rate offered" in w], quiet.warnings
    offered = quiet.levels[0].open_loop["offered_rps"]
    assert offered == pytest.approx(9.5, abs=0.2) and f"(its 5.0 s window was offered {offered:.3g} req/s)" in quiet.capacity.message



def test_an_uncertain_capacity_names_the_rate_its_held_levels_window_was_offered_too():
    """A trial: "holds 2 req/s within the SLOs with confidence, and up to 2.5 …" beside a window offered
    1.09 req/s; the found verdict's sentence named it, the uncertain one did not."""
    from dataclasses import replace

    from loadtest.analysis.capacity import find_capacity

    analysis = analyze(*_short_windows(7.0), SLO, resamples=50)
    above = analysis.levels[1]
    above.checks = [replace(c, verdict="uncertain", reason="interval straddles the limit") for c in above.checks]
    above.status = "uncertain"
    cap = find_capacity(analysis.levels, SLO, analysis.confidence)
    assert cap.verdict == "uncertain", cap
    assert "holds 10 req/s (its 5.0 s window was offered 7 req/s) within the SLOs with confidence" in cap.message, cap.message



def test_a_class_sentence_leaves_the_windows_offered_rate_to_the_endpoints():
    """A trial's chat class read "holds 2.5 req/s (its window was offered 1.44 req/s)": the class's share
    of the arrivals set against the whole level's nominal rate (the window was offered 1.80). The
    endpoint's sentence, beside it, names the window's offered rate; the class's says none."""
    from loadtest.analysis.capacity import find_capacity

    analysis = analyze(*_short_windows(7.0), SLO, resamples=50)
    chat = find_capacity(analysis.levels, SLO, analysis.confidence, class_name="chat")
    assert chat.message.startswith("The chat class, judged on its own requests, holds 10 req/s within its SLO"), chat.message
    assert "window was offered" not in chat.message
    assert "(its 5.0 s window was offered 7 req/s)" in analysis.capacity.message


class _Probe:
    def __init__(self, rate: float, passed: bool, window_s: float) -> None:
        self.rate_rps, self.passed, self.window_s = rate, passed, window_s


def _mode(**load):
    from loadtest.load.modes import load_mode
    from loadtest.scenario import parse_scenario

    return load_mode(parse_scenario({
        "name": "offered", "target": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        "workload": {"max_tokens": 8}, "load": {"rates": [8, 10], "level_duration_s": 4, "warmup_s": 1, **load},
    }))


def test_refine_steps_no_finer_than_the_windows_noise():
    """8 passes and 10 fails: a probe at 9 lies 1 req/s from either, within the ±1.7 req/s a 3 s window
    of Poisson arrivals varies by, so refine stops, whatever --rate-resolution asks; 30 s windows
    (±0.55) or constant arrivals (offered as nominal) split it, and a wide bracket is bisected as before."""
    short = [_Probe(8.0, True, 3.0), _Probe(10.0, False, 3.0)]
    assert _mode(arrival="poisson").next_refine(short, 0.1) is None
    assert _mode(arrival="poisson").next_refine([_Probe(8.0, True, 30.0), _Probe(10.0, False, 30.0)], 0.1) == 9.0
    assert _mode(arrival="constant").next_refine(short, 0.1) == 9.0
    assert _mode(arrival="gamma", burstiness=0.5).next_refine([_Probe(8.0, True, 6.0), _Probe(10.0, False, 6.0)], 0.1) is None
    assert _mode().next_refine([_Probe(8.0, True, 3.0), _Probe(16.0, False, 3.0)], None) == 12.0
    assert next_refine_rate(short, 0.1) == 9.0  # no arrival process named: no floor (as before)


def test_a_bracket_closer_than_its_windows_can_tell_apart_says_so():
    """Capacity 10 and first failure 10.5 in 5 s windows: 0.25 req/s apart against ±1.4: one warning."""
    frame, run = _short_windows(10.0)
    frame.loc[frame["level_index"] == 1, "rate_rps"] = 10.5
    run["levels"][1]["rate_rps"] = 10.5
    warned = analyze(frame, run, SLO, resamples=50).warnings
    said = [w for w in warned if "closer than their 5.0 s windows can tell apart" in w]
    assert len(said) == 1 and "--refine stops at such a bracket" in said[0], warned


# -- a "!" the server's waiting gauge denies ----------------------------------------------------------

WAITING = "llamacpp:requests_deferred"


def _burst_at_the_edge():
    """8 req/s of 0.4 s requests, and a burst of 10 long (3 s) requests in the window's last 0.4 s, as a
    trace's rows may come: the completions counted a life later miss the burst (24 of 34 sends), though
    the server (ample slots) never queued a request."""
    warmup, window = 1.0, 4.0
    end = T0 + warmup + window
    steady = T0 + np.arange(0.0, warmup + window + 3.0, 1.0 / 6.0)
    burst = end - 0.4 + np.arange(10) * 0.035
    sends = np.concatenate([steady, burst])
    lives = np.concatenate([np.full(len(steady), 0.4), np.full(len(burst), 3.0)])
    order = np.argsort(sends, kind="stable")
    frame = _frame(0, 8.0, sends[order], lives[order])
    run = {"warmup_s": warmup, "ended_wall": end + 5.0, "levels": [_level(0, 8.0, T0, end, end + 2.9, warmup)],
           "server_metrics": {"enabled": True, "url": "http://127.0.0.1:1/metrics", "interval_s": 0.5, "signals": []}}
    return frame, run


def _gauge(times: np.ndarray, waiting: float) -> pd.DataFrame:
    rows = [{"wall": t, "metric": m, "labels": "{}", "value": v, "type": "gauge"}
            for t in times for m, v in ((WAITING, waiting), ("llamacpp:requests_processing", 2.0), ("up", 1.0))]
    return pd.DataFrame(rows)


def test_completions_behind_without_a_queue_at_the_server_keep_their_bang_and_say_the_gauge_read_0():
    """The "!" stays (a gauge of 0 cannot tell a burst from vLLM admitting an overload into its batch),
    and where the waiting gauge read 0 in every scrape a legend line says what else the shortfall is."""
    frame, run = _burst_at_the_edge()
    scrapes = T0 + 1.1 + np.arange(8) * 0.5
    counted = analyze(frame, run, SLO, resamples=50).levels[0].open_loop  # not scraped: the count stands
    assert not counted["server_kept_up"] and counted["keep_up_told"], counted
    analysis = analyze(frame, run, SLO, server_samples=_gauge(scrapes, 0.0), resamples=50)
    loop = analysis.levels[0].open_loop
    assert not loop["server_kept_up"], loop
    assert loop["completions_behind"] and loop["server_waiting_max"] == 0.0, loop
    assert counted["completions_behind"] and counted["server_waiting_max"] is None, counted
    analysis_q = analyze(frame, run, SLO, server_samples=_gauge(scrapes, 2.0), resamples=50)
    queued = analysis_q.levels[0].open_loop
    assert not queued["server_kept_up"] and queued["server_waiting_max"] == 2.0, queued
    assert summary_dict(analysis)["levels"][0]["open_loop"]["server_kept_up"] is False

    def terminal(result):
        console = Console(width=200, record=True)
        print_summary(result, console)
        return console.export_text()

    text = terminal(analysis)
    row = next(line for line in text.splitlines() if f"{loop['sent_rps']:.1f}/{loop['completed_rps']:.1f}!" in line)
    assert row and "! = the server could not keep up" in text, text
    assert "waiting count read 0 in every scrape" in text, text
    assert "waiting count read 0" not in terminal(analysis_q)  # it queued: the "!" needs no other reading
    few = analyze(frame, run, SLO, server_samples=_gauge(scrapes[:2], 0.0), resamples=50)
    assert "waiting count read 0" not in terminal(few)  # two scrapes: too few to say no request queued


def test_the_bang_legend_gives_the_sends_the_completions_were_held_against_where_the_table_shows_others():
    """A one-at-a-time server (0.2 s each: 5 req/s) offered a burst of 6 as the level began and then 7
    req/s: the window's sends read 8.2/s, but the completions (5/s) are held against the sends after
    the requests in flight filled up, 7.1/s; a "!" beside 8.2 read as 61%, and the legend now says 7.1."""
    service, window_s = 0.2, 4.0
    end = T0 + window_s
    arrivals = np.concatenate([T0 + np.arange(6) * 0.03, T0 + 0.2 + np.arange(0.0, window_s - 0.2, 1.0 / 7.0)])
    begin, free = np.empty_like(arrivals), T0
    for i, arrival in enumerate(arrivals):
        begin[i] = max(arrival, free)
        free = begin[i] + service
    held = np.arange(end, free, 1.0 / 7.0)  # the hold keeps the rate until the last measured request ends
    sends = np.concatenate([arrivals, held])
    starts = np.concatenate([begin, np.maximum(held, free)])
    frame = _frame(0, 7.0, sends, starts + service - sends)
    frame["ttft_ms"] = frame["ttfb_ms"] = (starts - sends) * 1000.0 + 10.0
    frame["chunk_ms"] = [[a, b] for a, b in zip(frame["ttft_ms"], frame["e2e_ms"])]
    run = {"warmup_s": 0.0, "ended_wall": free + 5.0, "levels": [_level(0, 7.0, T0, end, float(free), 0.0)]}
    analysis = analyze(frame, run, SloSpec.from_dict({"ttft_ms": {"p95": 5000}}), resamples=50)
    loop = analysis.levels[0].open_loop
    assert not loop["server_kept_up"] and loop["sent_rps"] == pytest.approx(8.25, abs=0.1), loop
    filled = T0 + service - 0.01  # the median time in the batch (first token to end) after the level began
    compared = int(((arrivals >= filled) & (arrivals < end)).sum()) / (end - filled)
    assert loop["completed_rps"] < 0.9 * compared and compared < loop["sent_rps"] - 0.5, loop
    console = Console(width=200, record=True)
    print_summary(analysis, console)
    legend = next(line for line in console.export_text().splitlines() if line.startswith("! ="))
    assert f"at 7 req/s {compared:.1f}/s, not the {loop['sent_rps']:.1f} shown" in legend, legend
    assert loop["keep_up_sent_rps"] == pytest.approx(compared, rel=0.01), loop
