"""Open loop's pure parts: arrival draws, rate bisection, and the analysis from the scheduled time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loadtest.analysis import analyze, next_refine_rate
from loadtest.analysis.slo import SloSpec
from loadtest.load.arrivals import arrival_offsets, share_offsets, stream_rng


def test_poisson_arrivals_have_the_rate_and_exponential_gaps():
    times = arrival_offsets(50.0, 200.0, "poisson", stream_rng(7, 0, 0))
    assert np.all(np.diff(times) > 0) and times[-1] < 200.0
    assert len(times) == pytest.approx(50 * 200, rel=0.03)
    gaps = np.diff(times)
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.04)  # exponential: CV 1


def test_constant_and_gamma_arrivals():
    times = arrival_offsets(10.0, 5.0, "constant", stream_rng(1, 2, 0))
    assert np.allclose(np.diff(times), 0.1) and len(times) in (49, 50) and times[0] < 0.1
    bursty = np.diff(arrival_offsets(20.0, 500.0, "gamma", stream_rng(1, 0, 0), burstiness=0.25))
    assert bursty.mean() == pytest.approx(1 / 20, rel=0.05)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.1)  # CV = 1/sqrt(burstiness)


def test_streams_are_seeded_and_independent():
    a = arrival_offsets(5.0, 10.0, "poisson", stream_rng(3, 1, 0))
    assert np.array_equal(a, arrival_offsets(5.0, 10.0, "poisson", stream_rng(3, 1, 0)))
    assert not np.array_equal(a[:5], arrival_offsets(5.0, 10.0, "poisson", stream_rng(3, 1, 1))[:5])
    assert not np.array_equal(a[:5], arrival_offsets(5.0, 10.0, "poisson", stream_rng(3, 2, 0))[:5])


def test_merged_worker_streams_are_poisson_at_the_full_rate():
    """N workers at rate/N from their own streams: counts per second have mean = variance = rate."""
    rate, workers, seconds = 40.0, 4, 400.0
    merged = np.sort(np.concatenate([
        arrival_offsets(rate / workers, seconds, "poisson", stream_rng(11, 0, w)) for w in range(workers)
    ]))
    counts = np.histogram(merged, bins=int(seconds), range=(0, seconds))[0]
    assert counts.mean() == pytest.approx(rate, rel=0.03)
    assert counts.var() / counts.mean() == pytest.approx(1.0, abs=0.15)  # Poisson dispersion
    gaps = np.diff(merged)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)



@pytest.mark.parametrize("arrival, burstiness", [("constant", None), ("gamma", 4.0), ("gamma", 0.5)])
@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_constant_and_gamma_shares_merge_into_the_one_process_schedule(arrival, burstiness, workers):
    """Workers deal out one schedule: merged, their shares are exactly what one process sends.

    Drawn apart, two constant streams at rate/2 with random phases arrived in near-pairs
    (20.5 / 479.5 ms gaps at 4 req/s), and merged gamma streams lose their regularity.
    """
    rate, seconds = 4.0, 60.0
    one = share_offsets(rate, seconds, arrival, seed=5, level_index=2, burstiness=burstiness)
    assert np.array_equal(one, arrival_offsets(rate, seconds, arrival, stream_rng(5, 2, 0), burstiness=burstiness))
    shares = [share_offsets(rate, seconds, arrival, seed=5, level_index=2, streams=workers, stream=k,
                            burstiness=burstiness) for k in range(workers)]
    assert sum(len(s) for s in shares) == len(one)
    assert np.array_equal(np.sort(np.concatenate(shares)), one)
    if arrival == "constant":
        assert np.allclose(np.diff(np.sort(np.concatenate(shares))), 1 / rate)


def test_poisson_shares_are_drawn_apart_as_before():
    """Poisson keeps one stream per worker at rate/N (the superposition is Poisson), as runs always drew it."""
    share = share_offsets(40.0, 10.0, "poisson", seed=11, level_index=0, streams=4, stream=3)
    assert np.array_equal(share, arrival_offsets(10.0, 10.0, "poisson", stream_rng(11, 0, 3)))


class _Level:
    def __init__(self, rate, passed):
        self.rate_rps, self.passed = rate, passed


def test_rate_bisection_stops_at_the_resolution():
    assert next_refine_rate([_Level(8, True), _Level(16, False)]) == 12
    assert next_refine_rate([_Level(8, True), _Level(16, False), _Level(12, False)]) == 10
    # default resolution: 5% of the first failing rate
    assert next_refine_rate([_Level(10, True), _Level(10.5, False)]) is None
    assert next_refine_rate([_Level(10, True), _Level(11, False)]) == 10.5
    assert next_refine_rate([_Level(10, True), _Level(11, False)], resolution=1.0) is None
    assert next_refine_rate([_Level(10, True), _Level(20, True)]) is None  # nothing failed


def _records(lags, ttft=20.0, scheduled=True, dropped=0):
    n = len(lags)
    start = 1000.0 + np.arange(n) * 0.1
    frame = pd.DataFrame({
        "request_id": [f"r{i}" for i in range(n)], "worker": "local", "user": 0, "level": 0, "level_index": 0,
        "warmup": False, "start_wall": start + np.asarray(lags) / 1000.0, "ttfb_ms": ttft, "ttft_ms": ttft,
        "e2e_ms": 100.0, "chunk_ms": [[ttft, 100.0]] * n, "chunk_tokens": [[1, 1]] * n, "completion_tokens": 2,
        "token_source": "usage", "status": 200, "ok": True, "error_kind": None, "error": None,
    })
    if scheduled:
        frame["rate_rps"] = 10.0
        frame["scheduled_wall"] = start
        frame["schedule_lag_ms"] = np.asarray(lags, dtype=float)
        if dropped:  # the first ones found max_in_flight requests in flight: never sent
            cols = ["ok", "error_kind", "schedule_lag_ms", "e2e_ms", "ttft_ms", "ttfb_ms"]
            frame.loc[: dropped - 1, cols] = [False, "dropped", np.nan, 0.0, np.nan, np.nan]
    return frame


def _run(rate=10.0):
    return {"warmup_s": 0, "levels": [{"index": 0, "concurrency": 0, "start_wall": 1000.0, "end_wall": 1010.0,
                                       "rate_rps": rate}], "ended_wall": 1011.0}


def test_ttft_is_measured_from_the_scheduled_time_and_late_sends_saturate_the_client():
    slo = SloSpec.from_dict({"ttft_ms": {"p50": 40}, "max_error_rate": 0.5})
    on_time = analyze(_records([1.0] * 100), _run(), slo).levels[0]
    assert on_time.ttft_ms.p50 == pytest.approx(21.0) and on_time.status == "pass"
    assert not on_time.client_saturated and on_time.open_loop["schedule_lag_ms"]["p99"] == pytest.approx(1.0)
    late = analyze(_records([30.0] * 100), _run(), slo).levels[0]
    assert late.ttft_ms.p50 == pytest.approx(50.0) and late.status == "fail"  # the lag counts against the SLO
    assert late.client_saturated and "later than 10 ms" in late.client["reason"]
    closed = analyze(_records([30.0] * 100, scheduled=False), {**_run(None)}, slo).levels[0]
    assert closed.ttft_ms.p50 == pytest.approx(20.0) and closed.open_loop is None and closed.rate_rps is None


def test_offered_sent_and_completed_rates_and_dropped_arrivals():
    slo = SloSpec.from_dict({"max_error_rate": 0.05})
    analysis = analyze(_records([1.0] * 100, dropped=10), _run(), slo)
    level = analysis.levels[0]
    o = level.open_loop
    assert (o["arrivals"], o["sent"], o["dropped"]) == (100, 90, 10)
    assert o["offered_rps"] == pytest.approx(10.0) and o["sent_rps"] == pytest.approx(9.0)
    assert o["completed_rps"] == pytest.approx(9.0, abs=0.15) and o["server_kept_up"]  # the last ends after the window
    assert level.errors_by_kind == {"dropped": 10} and level.status == "fail"
    # each request is in flight 100 ms at 9 req/s: 0.9 on average (Little's law)
    assert o["mean_in_flight"] == pytest.approx(0.9, abs=0.02)
    assert analysis.capacity.rate_rps is None and analysis.capacity.first_failing_rate_rps == 10.0
    assert analysis.capacity.concurrency is None and "10 req/s" in analysis.capacity.message


def test_capacity_and_autoscaling_in_requests_per_second():
    """10 req/s passes and 20 req/s fails: capacity 10 req/s, 8 req/s per replica with 20% headroom."""
    fast, slow = _records([1.0] * 100, ttft=20.0), _records([1.0] * 100, ttft=400.0)
    slow["level_index"], slow["rate_rps"] = 1, 20.0
    shift = 20.0  # the second level runs 20 s later
    slow["start_wall"] += shift
    slow["scheduled_wall"] += shift
    run = {"warmup_s": 0, "ended_wall": 1031.0, "levels": [
        {"index": 0, "concurrency": 0, "start_wall": 1000.0, "end_wall": 1010.0, "rate_rps": 10.0},
        {"index": 1, "concurrency": 0, "start_wall": 1020.0, "end_wall": 1030.0, "rate_rps": 20.0},
    ]}
    analysis = analyze(pd.concat([fast, slow], ignore_index=True), run,
                       SloSpec.from_dict({"ttft_ms": {"p95": 100}, "max_error_rate": 0.5}))
    cap = analysis.capacity
    assert (cap.rate_rps, cap.first_failing_rate_rps, cap.verdict, cap.concurrency) == (10.0, 20.0, "found", None)
    # the "20 req/s" records hold 10 a second: the sentence says what that window was offered
    assert cap.message.startswith("This endpoint holds 10 req/s within the SLOs; at 20 req/s (its 10.0 s window was "
                                  "offered 10 req/s) the p95 TTFT"), cap.message
    assert cap.mean_in_flight == pytest.approx(analysis.levels[0].open_loop["mean_in_flight"])
    assert analysis.autoscaling.target_rate_rps_per_replica == pytest.approx(8.0)
    assert "aim for 8 req/s per replica" in analysis.autoscaling.paragraph


def test_a_request_still_in_flight_has_waited_since_its_scheduled_time():
    """At a look, an open-loop request sent 250 ms late and waiting 100 ms has waited 350 ms."""
    from loadtest.analysis.decide import decide_level, in_flight_records

    n = 200  # spread over the level, between the finished ones
    running = pd.DataFrame({
        "level_index": [0] * n, "warmup": False, "start_wall": 1000.02 + np.arange(n) * 0.045,
        "elapsed_ms": 100.0, "ttfb_ms": np.nan, "ttft_ms": np.nan, "class": None,
        "schedule_lag_ms": [250.0] * n,
    })
    censored = in_flight_records(running, 0)
    assert np.allclose(censored["scheduled_wall"], running["start_wall"] - 0.25)
    slo = SloSpec.from_dict({"ttft_ms": {"p50": 200}, "max_error_rate": 0.5})
    level = {"index": 0, "concurrency": 0, "start_wall": 1000.0, "rate_rps": 10.0}
    done = _records([1.0] * 100)
    late = decide_level(done, _run(), slo, level, 1010.0, 0.95, running)
    assert late.verdict == "fail", late  # 200 certain misses (350 ms > 200 ms) outnumber 100 on-time requests
    closed = decide_level(done, _run(), slo, level, 1010.0, 0.95, running.assign(schedule_lag_ms=None))
    assert closed.verdict != "fail"  # without the lag, 100 ms of waiting says nothing yet


def test_a_short_level_far_under_its_wait_limit_warns_that_an_overload_would_still_pass():
    """A 10 s level at TTFT p95 20 ms under a 1000 ms limit: a rate ~10% above what the server
    sustains grows the wait by ~0.1 s a second, ~1 s by the level's end, and might still pass. The
    capacity is then not confirmed to better than that, and the warning says so; with a tight margin
    (limit 100 ms: under 1% hidden) it does not."""
    loose = analyze(_records([1.0] * 100), _run(), SloSpec.from_dict({"ttft_ms": {"p95": 1000}}))
    said = [w for w in loose.warnings if "would still pass a level this short" in w]
    assert loose.capacity.rate_rps == 10.0 and len(said) == 1, loose.warnings
    assert "up to 10% above" in said[0] and "as low as 9.11 req/s" in said[0], said[0]
    tight = analyze(_records([1.0] * 100), _run(), SloSpec.from_dict({"ttft_ms": {"p95": 100}}))
    assert tight.capacity.rate_rps == 10.0 and not [w for w in tight.warnings if "level this short" in w]
    closed = analyze(_records([1.0] * 100, scheduled=False), {**_run(None)}, SloSpec.from_dict({"ttft_ms": {"p95": 1000}}))
    assert not [w for w in closed.warnings if "level this short" in w]  # closed loop: no queue grows unseen


def test_rates_read_with_four_significant_digits():
    """``:g`` printed six: a trace replay's "5.50171 req/s" (the window's mean rate × a speedup)."""
    from loadtest.analysis.results import fmt_rate

    assert [fmt_rate(x) for x in (5.501711, 7.044444, 12.5, 2.0, 0.25, 8.333333, 1234.5, 100000.0)] == [
        "5.502", "7.044", "12.5", "2", "0.25", "8.333", "1,234", "100,000"]


def _queued(rate: float, service: float, seconds: float = 10.0) -> tuple[pd.DataFrame, dict]:
    """One level of ``rate`` req/s at constant arrivals to a server that serves one request at a time,
    ``service`` s each, first come first served: its records and run.json."""
    t = 1000.0 + np.arange(int(rate * seconds)) / rate
    begin = np.empty_like(t)
    free = 1000.0
    for i, arrival in enumerate(t):
        begin[i] = max(arrival, free)
        free = begin[i] + service
    end = begin + service
    ttft = (begin - t) * 1000.0 + 10.0
    e2e = (end - t) * 1000.0
    frame = pd.DataFrame({
        "request_id": [f"r{i}" for i in range(len(t))], "worker": "local", "user": 0, "level": 0, "level_index": 0,
        "warmup": False, "start_wall": t, "ttfb_ms": ttft, "ttft_ms": ttft, "e2e_ms": e2e,
        "chunk_ms": [[a, a + 45.0, b] for a, b in zip(ttft, e2e)], "chunk_tokens": [[1, 1, 1]] * len(t),
        "completion_tokens": 3, "token_source": "usage", "status": 200, "ok": True, "error_kind": None, "error": None,
        "rate_rps": rate, "scheduled_wall": t, "schedule_lag_ms": 0.0,
    })
    run = {"warmup_s": 0, "levels": [{"index": 0, "concurrency": 0, "start_wall": 1000.0, "end_wall": 1000.0 + seconds,
                                      "rate_rps": rate}], "ended_wall": 1000.0 + 2 * seconds}
    return frame, run


def test_a_queue_that_grows_through_a_passing_level_is_said():
    """A trial: 10.5 req/s to a server that serves 10 passed a 2.5 s level (TTFT p95 208 ms against
    250), and the capacity read 10.5 req/s with no warning: the margin under the limit bounds the
    hidden overload at 1.7%, while the TTFT grew 50 ms a second through the level. The slope says it,
    and what the server sustains (R / (1 + e)); a level under the capacity has no such warning."""
    slo = SloSpec.from_dict({"ttft_ms": {"p95": 1000}})
    frame, run = _queued(10.5, 0.1, seconds=4.0)
    analysis = analyze(frame, run, slo)
    assert analysis.capacity.rate_rps == 10.5 and analysis.levels[0].status == "pass"
    grew = [w for w in analysis.warnings if "grew through the level by 50 ms a second" in w]
    assert grew and "the sustainable rate is about 10 req/s" in grew[0], analysis.warnings
    frame, run = _queued(9.5, 0.1, seconds=4.0)
    assert not [w for w in analyze(frame, run, slo).warnings if "grew through the level" in w]


def test_past_capacity_the_served_rate_is_the_servers_not_the_offered():
    """A trial: 16 req/s offered to a server that completes 10 read ``requests_per_s`` 12.5, beside
    tokens/s worth 10 requests: a success was counted by the share of its life in the window from its
    scheduled start, and past capacity that life is mostly the wait in a queue that grows all level.
    Here one request at a time is served, 100 ms each (10 req/s), 16 arrive a second for 10 s: the
    served rate is 10 whatever the queue, and the goodput and cost count the same way."""
    frame, run = _queued(16.0, 0.1)
    level = analyze(frame, run, SloSpec.from_dict({"ttft_ms": {"p95": 100_000}})).levels[0]
    assert level.requests_per_s == pytest.approx(10.0, rel=0.02), level.requests_per_s
    assert level.goodput_rps == pytest.approx(10.0, rel=0.02)
    assert level.output_tokens_per_s == pytest.approx(30.0, rel=0.05)  # 3 tokens a request: the same flow
