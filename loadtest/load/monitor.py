"""The harness watches itself: event-loop lag, stream-reader batches and CPU, per level.

A load generator that is out of CPU, or whose threads wait for each other,
timestamps chunks late and bunches them together: its ITL is wrong, and the
data alone cannot tell. Three figures are gathered per level:

- **loop lag**: a greenlet sleeps 10 ms and records how late it wakes. Every
  greenlet suffers the same delay: request sends and response heads (TTFB).
- **reactor batches**: how long the stream-reader thread took over each batch
  of ready streams (:mod:`loadtest.client.reactor`). A stream whose next bytes
  arrive while a batch is being processed is stamped up to one batch late, so
  this bounds the error of chunk times (TTFT, ITL).
- **reader lag**: how late the reader thread wakes for a 10 ms tick it asked
  the kernel for (waiting for a CPU and for the GIL); reported, not judged.
- **CPU**: the process's CPU time over the level's wall time, all threads.
  Python runs one thread at a time, so near 100% of one core the stream reader
  starts to queue behind the rest.

A level where the loop lag, the batch time or the CPU passed its limit is
marked ``client_saturated``, and the analyzer says its numbers are not
trustworthy. The limits are calibrated by ``benchmarks/bench_fidelity.py`` (see
the README's performance section): on the benchmark machine the loop lag p99
was the best single predictor of a p99 ITL error above 2 ms, because the
reader thread and the event loop compete for the same CPU and GIL.
"""

from __future__ import annotations

import time
from array import array

import gevent
import numpy as np

from loadtest.client.reactor import running_reactor
from loadtest.scenario import Scenario

#: The limits of a trustworthy level (calibrated by benchmarks/bench_fidelity.py;
#: a scenario's ``load.client_limits`` overrides them).
LAG_P99_LIMIT_MS = 2.5
BATCH_P99_LIMIT_MS = 2.0
CPU_LIMIT_PCT = 80.0
_INTERVAL_S = 0.01


class SelfMonitor:
    """Collects loop-lag samples, reader batch times and CPU time, per level."""

    @classmethod
    def for_scenario(cls, scenario: Scenario) -> "SelfMonitor":
        limits = scenario.load.client_limits
        return cls(limits.loop_lag_p99_ms, limits.reader_batch_p99_ms, limits.cpu_pct)

    def __init__(
        self,
        lag_limit_ms: float = LAG_P99_LIMIT_MS,
        batch_limit_ms: float = BATCH_P99_LIMIT_MS,
        cpu_limit_pct: float = CPU_LIMIT_PCT,
    ) -> None:
        self.lag_limit_ms = lag_limit_ms
        self.batch_limit_ms = batch_limit_ms
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
        lags, self._lags = self._lags, array("d")
        reader = running_reactor()
        batches, reader_lags, busy_s = reader.health() if reader is not None else (array("d"), array("d"), 0.0)
        self._mark_wall, self._mark_cpu = now_wall, now_cpu
        return summarize(
            _values(lags),
            _values(batches),
            _values(reader_lags),
            cpu_pct,
            100.0 * busy_s / elapsed,
            limits=(self.lag_limit_ms, self.batch_limit_ms, self.cpu_limit_pct),
        )


def _values(samples: array) -> np.ndarray:
    return np.frombuffer(samples, dtype=np.float64) if len(samples) else np.zeros(1)


def summarize(
    lags_ms: np.ndarray,
    batches_ms: np.ndarray,
    reader_lags_ms: np.ndarray,
    cpu_pct: float,
    reader_busy_pct: float,
    limits: tuple[float, float, float] = (LAG_P99_LIMIT_MS, BATCH_P99_LIMIT_MS, CPU_LIMIT_PCT),
) -> dict:
    """The per-level client health record written to run.json."""
    lag_limit, batch_limit, cpu_limit = limits
    lag_p99 = float(np.percentile(lags_ms, 99))
    batch_p99 = float(np.percentile(batches_ms, 99))
    reader_lag_p99 = float(np.percentile(reader_lags_ms, 99))
    reasons = []
    if lag_p99 > lag_limit:
        reasons.append(f"event-loop lag p99 {lag_p99:.1f} ms > {lag_limit:g} ms")
    if batch_p99 > batch_limit:
        reasons.append(f"stream-reader batch p99 {batch_p99:.1f} ms > {batch_limit:g} ms")
    if cpu_pct > cpu_limit:
        reasons.append(f"CPU {cpu_pct:.0f}% > {cpu_limit:g}%")
    return {
        "loop_lag_p50_ms": round(float(np.percentile(lags_ms, 50)), 3),
        "loop_lag_p99_ms": round(lag_p99, 3),
        "loop_lag_max_ms": round(float(lags_ms.max()), 3),
        "reader_lag_p99_ms": round(reader_lag_p99, 3),
        "reader_batch_p99_ms": round(batch_p99, 3),
        "reader_batch_max_ms": round(float(batches_ms.max()), 3),
        "reader_busy_pct": round(reader_busy_pct, 1),
        "cpu_pct": round(cpu_pct, 1),
        "saturated": bool(reasons),
        "reason": "; ".join(reasons) or None,
    }


def merge_worker_health(reports: list[dict]) -> dict:
    """A level is saturated if any worker was; the worst figures are reported, each worker's kept."""
    if not reports:
        return {}
    if len(reports) == 1:
        return dict(reports[0])
    keys = ("loop_lag_p50_ms", "loop_lag_p99_ms", "loop_lag_max_ms", "reader_lag_p99_ms", "reader_batch_p99_ms", "reader_batch_max_ms", "reader_busy_pct", "cpu_pct")
    merged: dict = {k: max(r.get(k) or 0.0 for r in reports) for k in keys}
    reasons = [f"{r.get('worker', '?')}: {r['reason']}" for r in reports if r.get("saturated")]
    merged.update(saturated=any(r.get("saturated") for r in reports), reason="; ".join(reasons) or None, workers=reports)
    return merged
