"""The self-check's verdict from its samples (the limits' calibration is a benchmark)."""

from __future__ import annotations

import numpy as np

from loadtest.load.monitor import merge_worker_health, summarize

CALM = np.full(100, 0.3)


def test_calm_level_passes():
    health = summarize(CALM, CALM, CALM, cpu_pct=20, reader_busy_pct=10)
    assert health["saturated"] is False and health["reason"] is None


def test_each_limit_marks_the_level_and_says_which():
    lag = np.concatenate([CALM, np.full(5, 9.0)])
    assert "event-loop lag p99" in summarize(lag, CALM, CALM, 20, 10)["reason"]
    assert "stream-reader batch p99" in summarize(CALM, lag, CALM, 20, 10)["reason"]
    assert "CPU 95%" in summarize(CALM, CALM, CALM, 95, 10)["reason"]
    # The reader's wake-up lag is reported, not judged.
    assert summarize(CALM, CALM, lag, 20, 10)["saturated"] is False


def test_a_level_is_saturated_if_any_worker_was():
    calm = dict(summarize(CALM, CALM, CALM, 20, 10), worker="w1")
    busy = dict(summarize(CALM, CALM, CALM, 95, 10), worker="w2")
    merged = merge_worker_health([calm, busy])
    assert merged["saturated"] is True and merged["reason"].startswith("w2: CPU")
    assert merged["cpu_pct"] == 95 and len(merged["workers"]) == 2
