"""The harness watches itself: event-loop lag and CPU, per level.

A load generator that is out of CPU, or whose gevent hub is busy, timestamps
chunks late and bunches them together: its ITL is wrong, and it cannot tell
from the data alone. So a greenlet sleeps a fixed interval and records how late
it wakes (the lag every other greenlet also suffers), and the process CPU time
is sampled per level. A level whose lag or CPU passed the thresholds is marked
``client_saturated`` and the analyzer says its numbers are not trustworthy.
"""

from __future__ import annotations

import time
from array import array

import gevent
import numpy as np

#: Defaults from the issue; calibrated by benchmarks/bench_fidelity.py.
LAG_P99_LIMIT_MS = 5.0
CPU_LIMIT_PCT = 80.0
_INTERVAL_S = 0.01


class SelfMonitor:
    """Collects loop-lag samples and CPU time, and summarizes them per level."""

    def __init__(self, lag_limit_ms: float = LAG_P99_LIMIT_MS, cpu_limit_pct: float = CPU_LIMIT_PCT) -> None:
        self.lag_limit_ms = lag_limit_ms
        self.cpu_limit_pct = cpu_limit_pct
        self._lags = array("d")
        self._greenlet: gevent.Greenlet | None = None
        self._mark_wall = time.perf_counter()
        self._mark_cpu = time.process_time()

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._watch)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _watch(self) -> None:
        while True:
            t = time.perf_counter()
            gevent.sleep(_INTERVAL_S)
            self._lags.append((time.perf_counter() - t - _INTERVAL_S) * 1000.0)

    def cut(self) -> dict:
        """Summarize the period since the last cut (one level) and start a new one."""
        now_wall, now_cpu = time.perf_counter(), time.process_time()
        elapsed = max(now_wall - self._mark_wall, 1e-9)
        cpu_pct = 100.0 * (now_cpu - self._mark_cpu) / elapsed
        lags = np.frombuffer(self._lags, dtype=np.float64).copy() if len(self._lags) else np.zeros(1)
        self._lags = array("d")
        self._mark_wall, self._mark_cpu = now_wall, now_cpu
        return summarize(lags, cpu_pct, self.lag_limit_ms, self.cpu_limit_pct)


def summarize(lags_ms: np.ndarray, cpu_pct: float, lag_limit_ms: float, cpu_limit_pct: float) -> dict:
    """The per-level client health record written to run.json."""
    p99 = float(np.percentile(lags_ms, 99))
    reasons = []
    if p99 > lag_limit_ms:
        reasons.append(f"event-loop lag p99 {p99:.1f} ms > {lag_limit_ms:g} ms")
    if cpu_pct > cpu_limit_pct:
        reasons.append(f"CPU {cpu_pct:.0f}% > {cpu_limit_pct:g}%")
    return {
        "loop_lag_p50_ms": round(float(np.percentile(lags_ms, 50)), 3),
        "loop_lag_p99_ms": round(p99, 3),
        "loop_lag_max_ms": round(float(lags_ms.max()), 3),
        "cpu_pct": round(cpu_pct, 1),
        "saturated": bool(reasons),
        "reason": "; ".join(reasons) or None,
    }


def merge_worker_health(reports: list[dict]) -> dict:
    """A level is saturated if any worker was; the worst figures are reported."""
    if not reports:
        return {}
    if len(reports) == 1:
        return dict(reports[0])
    merged = {k: max(r.get(k, 0.0) or 0.0 for r in reports) for k in ("loop_lag_p50_ms", "loop_lag_p99_ms", "loop_lag_max_ms", "cpu_pct")}
    reasons = [f"{r.get('worker', '?')}: {r['reason']}" for r in reports if r.get("saturated")]
    merged.update(saturated=any(r.get("saturated") for r in reports), reason="; ".join(reasons) or None, workers=reports)
    return merged
