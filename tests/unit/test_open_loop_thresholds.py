"""Open-loop and trace-replay thresholds are set on the load, not on the median of a few scrapes.

A trial against llama-server (trace replay, 6 scrapes at the capacity level) wrote
``threshold: "0.4"`` into autoscaling.yaml from a median of 0.5 running requests, where the
client's own time average of requests in flight was 1.6: KEDA's ceil(sum / threshold) would have
asked for about four times the replicas needed. The runs here are built so that every scrape reads
exactly the requests in flight at its instant (as the trial found the server's did): bursts of
requests, so that most instants see none and a few see a burst.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loadtest.analysis import analyze
from loadtest.analysis.slo import SloSpec
from loadtest.report.autoscaling_yaml import render_autoscaling_yaml
from loadtest.report.summary import summary_dict

RUNNING, WAITING, KV = "llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:kv_cache_usage_ratio"
#: Each burst: BURST requests at once, each DURATION_S long, every PERIOD_S: BURST × DURATION_S / PERIOD_S in flight.
BURST, DURATION_S, PERIOD_S = 6, 0.2, 0.6
LEVELS = [(0, 10.0, 1000.0, 20.0), (1, 20.0, 1020.0, 400.0)]  # index, rate, start, TTFT (the second fails)
#: What the manifests write where no threshold was measured (analysis/thresholds.py), spelled out here so
#: that this file runs, and fails, on the code from before it.
PLACEHOLDER = "<THRESHOLD>"
SLO = SloSpec.from_dict({"ttft_ms": {"p95": 100}, "max_error_rate": 0.5})


def _requests() -> pd.DataFrame:
    frames = []
    for index, rate, start, ttft in LEVELS:
        period = PERIOD_S * 10.0 / rate
        starts = np.repeat(start + np.arange(0.0, 9.5, period), BURST)
        n = len(starts)
        e2e = DURATION_S * 1000.0
        frames.append(pd.DataFrame({
            "request_id": [f"l{index}-{i}" for i in range(n)], "worker": "local", "user": 0, "level": 0,
            "level_index": index, "warmup": False, "start_wall": starts, "ttfb_ms": ttft, "ttft_ms": ttft,
            "e2e_ms": max(e2e, ttft + 1.0), "chunk_ms": [[ttft, max(e2e, ttft + 1.0)]] * n, "chunk_tokens": [[1, 1]] * n,
            "completion_tokens": 2, "token_source": "usage", "status": 200, "ok": True, "error_kind": None,
            "error": None, "rate_rps": rate, "scheduled_wall": starts, "schedule_lag_ms": 0.0,
        }))
    return pd.concat(frames, ignore_index=True)


def _run() -> dict:
    return {"warmup_s": 0, "ended_wall": 1031.0, "levels": [
        {"index": i, "concurrency": 0, "start_wall": s, "end_wall": s + 10.0, "rate_rps": r} for i, r, s, _ in LEVELS],
        "server_metrics": {"enabled": True, "url": "http://127.0.0.1:1/metrics", "interval_s": 1.0, "signals": []}}


def _in_flight_at(requests: pd.DataFrame, t: float) -> int:
    start = requests["start_wall"].to_numpy()
    end = start + requests["e2e_ms"].to_numpy() / 1000.0
    return int(((start <= t) & (t < end)).sum())


def _samples(requests: pd.DataFrame, times: list[float], waiting_at: dict[float, int] | None = None) -> pd.DataFrame:
    """The server's gauges at ``times``: running + waiting = the requests in flight then (``waiting_at``: how many
    of them wait at a given time); the KV cache fills with the running ones."""
    rows = []
    for t in times:
        waiting = (waiting_at or {}).get(t, 0)
        running = _in_flight_at(requests, t) - waiting
        for metric, value in ((RUNNING, running), (WAITING, waiting), (KV, running / 16), ("up", 1.0)):
            rows.append({"wall": t, "metric": metric, "labels": "{}", "value": float(value), "type": "gauge"})
    return pd.DataFrame(rows)


#: Four scrapes at the capacity level (three between bursts, one in one), four at the failing one.
FEW = [1000.45, 1002.85, 1005.25, 1007.3, 1021.0, 1023.0, 1025.05, 1027.0]


def _analyze(times: list[float], **kw):
    requests = _requests()
    return analyze(requests, _run(), SLO, server_samples=_samples(requests, times, **kw), resamples=50)


def _signal(a, metric):
    return next(s for s in a.autoscaling.signals if s.metric == metric)


def test_few_scrapes_of_a_running_gauge_take_the_clients_time_average_of_requests_in_flight():
    """The median of the four scrapes is 0 (the old threshold: 0 running, a replica per request); the
    client's average is 2 in flight, which the running gauge counts while nothing waits."""
    a = _analyze(FEW)
    assert a.capacity.rate_rps == 10.0
    in_flight = a.levels[0].open_loop["mean_in_flight"]
    assert in_flight == pytest.approx(BURST * DURATION_S / PERIOD_S, rel=0.05)
    running = _signal(a, RUNNING)
    assert running.at_capacity.n == 4 and running.at_capacity.p50 == 0
    assert running.threshold == pytest.approx(round(in_flight * 0.8, 2))  # it was 0: the median × 0.8
    assert running.basis == "client_in_flight" and running.basis_value == pytest.approx(in_flight, abs=1e-3)
    assert "the client's own time average of requests in flight" in running.why
    assert a.autoscaling.best == RUNNING
    assert f"> {running.threshold:g} per replica" in a.autoscaling.paragraph
    assert "the client's time average of requests in flight" in a.autoscaling.paragraph
    text = render_autoscaling_yaml(a)
    assert f'threshold: "{running.threshold:g}"  # per replica, from this run: the client\'s requests in flight' in text
    signals = summary_dict(a)["autoscaling"]["signals"]
    assert [(s["metric"], s["basis"]) for s in signals][0] == (RUNNING, "client_in_flight")


def test_few_scrapes_with_requests_waiting_leave_the_threshold_to_fill_in():
    """The client's count includes waiting requests: once the waiting gauge saw one at capacity, it no
    longer stands for the running gauge, and no number is written."""
    a = _analyze(FEW, waiting_at={1007.3: 1})
    running = _signal(a, RUNNING)
    assert running.threshold is None and running.basis is None and running.placeholder
    assert "up to 1 waited there" in running.why and PLACEHOLDER in running.why
    assert a.autoscaling.best == RUNNING  # the trigger stays the most direct signal; its number is to fill in
    assert f"{RUNNING} > {PLACEHOLDER} per replica" in a.autoscaling.paragraph
    text = render_autoscaling_yaml(a)
    assert f'threshold: "{PLACEHOLDER}"  # per replica, not measured: fill in' in text
    assert f'averageValue: "{PLACEHOLDER}"' in text and f"Trigger: {RUNNING} > {PLACEHOLDER} per replica" in text


def test_few_scrapes_of_a_gauge_without_a_client_equivalent_give_no_threshold():
    a = _analyze(FEW)
    kv = _signal(a, KV)
    assert kv.threshold is None and kv.placeholder and "no count of the client's measures this signal" in kv.why
    # "any request waits" reads no magnitude off the scrapes: it stands with few of them
    waiting = _signal(a, WAITING)
    assert waiting.threshold == 1.0 and (waiting.basis, waiting.basis_value) == ("rule", None)


def test_enough_scrapes_set_the_threshold_on_the_time_average_not_the_median():
    """A burst is in flight a third of the time: the median scrape reads 0, the average 2."""
    times = list(np.arange(1000.05, 1010.0, 0.137)) + list(np.arange(1020.05, 1030.0, 0.137))  # no alias with 0.6 s
    a = _analyze(times)
    running = _signal(a, RUNNING)
    assert running.at_capacity.n >= 8 and running.at_capacity.p50 == 0
    assert running.threshold == pytest.approx(a.levels[0].open_loop["mean_in_flight"] * 0.8, rel=0.1)  # it was 0
    assert running.basis == "time_mean"
    assert running.threshold == pytest.approx(round(running.basis_value * 0.8, 2))
    assert "on average over" in running.why and "not its median" in running.why
