"""The harness watches itself: how late its own timestamps can be, and its CPU, per level.

A load generator that is out of CPU, or whose threads wait for each other,
timestamps chunks late and bunches them together: its ITL is wrong, and the
data alone cannot tell. So each level records the client's own delays:

- **stamp delay** (chunk times: TTFT's end, every ITL gap), bounded read by
  read. The reader thread (:mod:`loadtest.client.reactor`) stamps a batch
  when its ``epoll`` call returns, plain HTTP and TLS alike; with
  ``LOADTEST_TLS_READS=greenlets`` each user's greenlet reads its own TLS
  stream and is stamped when the hub's ``epoll`` returned
  (:mod:`loadtest.client.hub_clock`). Either way, a read that a
  waiting ``epoll`` woke is late by a wake-up (the reader thread measures its
  own against the timeouts the kernel promised; the event loop its own with a
  probe thread's bytes), a read whose data was already waiting by at most the
  time since it could last have been seen missing. One value per read, not
  per batch: a percentile of gaps weighs every chunk alike, and a late batch
  is usually a large one.
- **send delay** (the start of TTFT and e2e): a greenlet that sends a request
  may run late by the event-loop lag: a greenlet sleeps 10 ms and records how
  late it wakes.
- **CPU**: the process's CPU time over the level's wall time, all threads.

Only the measured part of a level counts: what happens during its warmup
(users spawning, connections and TLS handshakes, the previous level's
requests draining) delays no stamp that the analysis uses, so the figures
are restarted when the warmup ends.

Both distributions are kept as quantile tables (``stamp_delay_ms``,
``send_delay_ms``), because the error a percentile can suffer depends on the
percentile: a p95 of gaps is moved by the delays that hit more than a few
percent of stamps, a p99 by rarer ones (:mod:`loadtest.analysis.client_error`).
``itl_error_bound_ms`` and ``ttft_error_bound_ms`` are the bounds for a p95
check, for reading at a glance. Whether a level can be trusted is then a question about its
*verdict*, which the analysis answers (:mod:`loadtest.analysis.client_error`):
a level is ``client_saturated`` only when the bound could move a check across
its limit. A level above the CPU limit is flagged here, whatever its verdicts:
near 100% of a core, queueing makes every delay unbounded. The old fixed
limits on loop lag and reader batch time remain available as optional hard
limits (``load.client_limits``), off by default.

However long a level runs, these figures take bounded memory: once a
reader has gathered :data:`FOLD_AT` values in a level, they are folded into
the level's :class:`LevelFigures` (exact values up to a cap, then a fine
histogram: :mod:`loadtest.load.level_sample`). A level shorter than that
(about four minutes at 100 streams) gives exactly the figures it always did.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import fields

import gevent
import numpy as np

from loadtest.analysis.client_error import delay_for_percentile

from loadtest.client.hub_clock import hub_clock, running_hub_clock
from loadtest.client.reactor import running_reactor
from loadtest.client.reader_health import ReaderHealth
from loadtest.client.tls_read import reactor_reads_tls
from loadtest.load.host import HostSampler
from loadtest.load.level_sample import EXACT_CAP, LevelSample
from loadtest.load.levels import LevelClock
from loadtest.scenario import Scenario

#: The quantiles of the delay distributions kept per level (see module doc).
DELAY_QUANTILES = (0.5, 0.75, 0.875, 0.9, 0.95, 0.975, 0.9875, 0.99, 0.995, 0.9975, 0.999)

#: Above this share of one core the client's delays are no longer bounded.
CPU_LIMIT_PCT = 80.0
_INTERVAL_S = 0.01
#: The run queue is read every this many loop-lag samples (twice a second).
_HOST_EVERY = 50
#: The readers' gathered values are counted every this many ticks (once a second) ...
_FOLD_CHECK_EVERY = 100
#: ... and folded into the level's figures once any one source holds this many.
FOLD_AT = EXACT_CAP


class LevelFigures:
    """A level's self-check figures folded so far: bounded however long the level runs.

    Each fold pairs the woken reads' tails with the wake-ups of the same
    stretch of the level (see :func:`stamp_delays`), which is, if anything,
    closer than pairing them with the whole level's.
    """

    def __init__(self) -> None:
        self.lags = LevelSample()
        self.batches = LevelSample()
        self.delays = LevelSample()
        self.reader_ticks = LevelSample()
        self.hub_ticks = LevelSample()
        self.busy_s = 0.0

    def add(self, lags_ms: "array | np.ndarray", health: ReaderHealth, greenlets: ReaderHealth) -> None:
        self.lags.add(np.frombuffer(lags_ms, dtype=np.float64) if isinstance(lags_ms, array) else lags_ms)
        self.batches.add(np.frombuffer(health.batch_ms, dtype=np.float64))
        self.delays.add(np.concatenate([stamp_delays(health), stamp_delays(greenlets)]))
        self.reader_ticks.add(np.frombuffer(health.tick_lag_ms, dtype=np.float64))
        self.hub_ticks.add(np.frombuffer(greenlets.tick_lag_ms, dtype=np.float64))
        self.busy_s += health.busy_s


class SelfMonitor:
    """Collects loop-lag samples, the reader's delays and CPU time, per level."""

    @classmethod
    def for_scenario(cls, scenario: Scenario, clock: LevelClock | None = None) -> "SelfMonitor":
        limits = scenario.load.client_limits
        return cls(
            limits.cpu_pct,
            lag_limit_ms=limits.loop_lag_p99_ms,
            batch_limit_ms=limits.reader_batch_p99_ms,
            greenlet_reads=scenario.target.base_url.startswith("https://") and not reactor_reads_tls(),
            clock=clock,
        )

    def __init__(
        self,
        cpu_limit_pct: float = CPU_LIMIT_PCT,
        *,
        lag_limit_ms: float | None = None,
        batch_limit_ms: float | None = None,
        greenlet_reads: bool = False,
        clock: LevelClock | None = None,
    ) -> None:
        self.cpu_limit_pct = cpu_limit_pct
        #: The level in force: figures gathered during a level's warmup are dropped.
        self.clock = clock
        self._warming = False
        self.lag_limit_ms = lag_limit_ms
        self.batch_limit_ms = batch_limit_ms
        #: Streams are read by user greenlets (TLS), not the reader thread.
        self.greenlet_reads = greenlet_reads
        self._lags = array("d")
        #: What was folded of this level so far (None: nothing yet, the usual case).
        self._figures: LevelFigures | None = None
        self._greenlet: gevent.Greenlet | None = None
        self._mark_wall = time.perf_counter()
        self._mark_cpu = time.process_time()
        #: The machine's load beside ours: whose fault a late stamp is (load/host.py).
        self._host = HostSampler()

    def start(self) -> None:
        if self.greenlet_reads:
            hub_clock()  # greenlet reads are stamped and bounded by the hub's poll clock
        self._greenlet = gevent.spawn(self._watch)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _watch(self) -> None:
        ticks = 0
        while True:
            ticks += 1
            if ticks % _HOST_EVERY == 0:
                self._host.sample()
            if ticks % _FOLD_CHECK_EVERY == 0 and _gathered(self._lags) >= FOLD_AT:
                self._fold()
            t = time.perf_counter()
            gevent.sleep(_INTERVAL_S)
            now = time.perf_counter()
            due = t + _INTERVAL_S
            warming = self._in_warmup(now)
            if not warming and (self._warming or self._in_warmup(t)):
                # The measured window began during this sleep: start its figures afresh, and
                # keep only the part of this wake-up's lateness that fell inside the window
                # (a loop stalled by the warm-up's spawning must not count against the level).
                self._restart()
                assert self.clock is not None
                due = max(due, self.clock.start_perf + self.clock.warmup_s)
            self._lags.append(max(0.0, now - due) * 1000.0)
            self._warming = warming

    def _in_warmup(self, t_perf: float) -> bool:
        return self.clock is not None and self.clock.index >= 0 and self.clock.in_warmup(t_perf)

    def _restart(self) -> None:
        """Drop what was gathered so far in this level (its warmup)."""
        self._lags = array("d")
        self._figures = None
        _take_health()
        self._mark_wall, self._mark_cpu = time.perf_counter(), time.process_time()
        self._host.mark()

    def _fold(self) -> None:
        """Move what the readers gathered so far into the level's bounded figures."""
        lags, self._lags = self._lags, array("d")
        if self._figures is None:
            self._figures = LevelFigures()
        self._figures.add(lags, *_take_health())

    def cut(self) -> dict:
        """Summarize the period since the last cut (one level) and start a new one."""
        now_wall, now_cpu = time.perf_counter(), time.process_time()
        elapsed = max(now_wall - self._mark_wall, 1e-9)
        cpu_pct = 100.0 * (now_cpu - self._mark_cpu) / elapsed
        lags, self._lags = self._lags, array("d")
        earlier, self._figures = self._figures, None
        health, greenlets = _take_health()
        self._mark_wall, self._mark_cpu = now_wall, now_cpu
        busy_s = health.busy_s + (earlier.busy_s if earlier is not None else 0.0)
        report = summarize(
            lags,
            health,
            cpu_pct,
            100.0 * busy_s / elapsed,
            greenlets=greenlets,
            greenlet_reads=self.greenlet_reads,
            limits=(self.cpu_limit_pct, self.lag_limit_ms, self.batch_limit_ms),
            earlier=earlier,
        )
        report.update(self._host.take())
        return report


def _take_health() -> tuple[ReaderHealth, ReaderHealth]:
    """The stream readers' figures since the last call: the reader thread's and the greenlets'.

    The reader thread's arrays are copied: it may still append to the array it
    held when they were swapped, and an array whose buffer numpy is viewing
    cannot grow (the append would raise in the reader thread).
    """
    reader, clock = running_reactor(), running_hub_clock()
    return (_copied(reader.health()) if reader is not None else ReaderHealth(),
            clock.health() if clock is not None else ReaderHealth())


def _copied(health: ReaderHealth) -> ReaderHealth:
    """``health`` with each array copied whole (``tobytes`` runs under the GIL, in one piece)."""
    return ReaderHealth(**{f.name: array("d", value.tobytes()) if isinstance(value := getattr(health, f.name), array)
                           else value for f in fields(health)})


def _gathered(lags: array) -> int:
    """The most values any one source holds for this level, unfolded (a cheap count, no copy)."""
    counts = [len(lags)]
    reader, clock = running_reactor(), running_hub_clock()
    if reader is not None:
        counts += [len(reader.batch_ms), len(reader.tick_lag_ms), len(reader.waiting_bound_ms),
                   len(reader.woken_tail_ms), len(reader.measured_ms)]
    if clock is not None:
        counts += [len(clock.waiting_bound_ms), len(clock.woken_tail_ms), len(clock.wake_ms)]
    return max(counts)


def _values(samples: array) -> np.ndarray:
    return np.frombuffer(samples, dtype=np.float64) if len(samples) else np.zeros(1)


def stamp_delays(health: ReaderHealth) -> np.ndarray:
    """The distribution of how late chunk stamps can be, one value per read of one reader.

    Reads whose arrival the kernel stamped take their measured delay (with
    the bound as a floor where it applies); other reads whose data was already
    waiting take their own bound. Other reads that a
    waiting ``epoll`` woke are late by a wake-up, drawn from the reader's own
    wake-up lateness (``tick_lag_ms``, spread evenly over that many reads), plus
    their tail (0 for the reader thread); tails and wake-ups are paired in the
    same order, largest with largest, which no coupling of the two exceeds at
    the upper quantiles.
    """
    parts = [np.frombuffer(a, dtype=np.float64) for a in (health.waiting_bound_ms, health.measured_ms) if len(a)]
    woken = len(health.woken_tail_ms)
    if woken:
        tails = np.sort(np.frombuffer(health.woken_tail_ms, dtype=np.float64))
        wake = _values(health.tick_lag_ms)
        parts.append(tails + np.quantile(wake, (np.arange(woken) + 0.5) / woken))
    return np.concatenate(parts) if parts else np.zeros(0)


def quantile_table(values: "np.ndarray | LevelSample") -> dict[str, float]:
    """``{"0.5": …, …, "max": …}`` of a delay sample (ms), for run.json."""
    quantiles = values.quantiles(DELAY_QUANTILES) if isinstance(values, LevelSample) else np.quantile(values, DELAY_QUANTILES)
    table = {f"{q:g}": round(float(v), 3) for q, v in zip(DELAY_QUANTILES, quantiles)}
    table["max"] = round(float(values.max()), 3)
    return table


def error_bound(table: dict[str, float], q: float) -> float:
    """The delay a check at percentile ``q`` must allow for (see analysis/client_error.py)."""
    return delay_for_percentile(table, q)


def summarize(
    lags_ms: "np.ndarray | array",
    health: ReaderHealth,
    cpu_pct: float,
    reader_busy_pct: float,
    *,
    greenlets: ReaderHealth | None = None,
    greenlet_reads: bool = False,
    limits: tuple[float, float | None, float | None] = (CPU_LIMIT_PCT, None, None),
    earlier: LevelFigures | None = None,
) -> dict:
    """The per-level client health record written to run.json.

    ``health`` is the reader thread's, ``greenlets`` the hub clock's (TLS reads);
    ``earlier``: what was folded of this level before (a long level), to which
    these last figures are added. (An empty sample reads as 0: nothing read,
    nothing late.)
    """
    cpu_limit, lag_limit, batch_limit = limits
    figures = earlier or LevelFigures()
    figures.add(lags_ms, health, greenlets or ReaderHealth())
    lags, batches, delays = figures.lags, figures.batches, figures.delays
    lag_p99 = lags.percentile(99)
    batch_p99 = batches.percentile(99)
    stamp_p99 = delays.percentile(99)
    stamp_table, send_table = quantile_table(delays), quantile_table(lags)
    reasons = []
    if cpu_pct > cpu_limit:
        reasons.append(f"CPU {cpu_pct:.0f}% > {cpu_limit:g}% of a core")
    if lag_limit is not None and lag_p99 > lag_limit:
        reasons.append(f"event-loop lag p99 {lag_p99:.1f} ms > {lag_limit:g} ms")
    if batch_limit is not None and batch_p99 > batch_limit:
        reasons.append(f"stream-reader batch p99 {batch_p99:.1f} ms > {batch_limit:g} ms")
    return {
        "stamp_delay_p50_ms": round(delays.percentile(50), 3),
        "stamp_delay_p99_ms": round(stamp_p99, 3),
        "stamp_delay_max_ms": round(delays.max(), 3),
        "stamp_delay_ms": stamp_table,
        "send_delay_ms": send_table,
        "itl_error_bound_ms": round(error_bound(stamp_table, 0.95), 3),
        "ttft_error_bound_ms": round(error_bound(stamp_table, 0.95) + error_bound(send_table, 0.95), 3),
        "loop_lag_p50_ms": round(lags.percentile(50), 3),
        "loop_lag_p99_ms": round(lag_p99, 3),
        "loop_lag_max_ms": round(lags.max(), 3),
        "reader_lag_p99_ms": round(figures.reader_ticks.percentile(99), 3),
        "hub_wake_p99_ms": round(figures.hub_ticks.percentile(99), 3),
        "reader_batch_p99_ms": round(batch_p99, 3),
        "reader_batch_max_ms": round(batches.max(), 3),
        "reader_busy_pct": round(reader_busy_pct, 1),
        "reads": "greenlets" if greenlet_reads else "reactor",
        "cpu_pct": round(cpu_pct, 1),
        "cpu_limit_pct": cpu_limit,  # the scenario's client_limits.cpu_pct: past it, the client's own saturation
        "saturated": bool(reasons),
        "reason": "; ".join(reasons) or None,
    }


def merge_worker_health(reports: list[dict]) -> dict:
    """A level is saturated if any worker was; the worst figures are reported, each worker's kept."""
    if not reports:
        return {}
    if len(reports) == 1:
        return dict(reports[0])
    keys = [k for k in reports[0] if k.endswith(("_ms", "_pct")) or k.startswith("host_")]
    merged: dict = {}
    for k in keys:
        if isinstance(reports[0][k], dict):  # a quantile table: the worst worker at every quantile
            merged[k] = {q: max((r.get(k) or {}).get(q) or 0.0 for r in reports) for q in reports[0][k]}
        else:  # the worst worker's (None where no worker could measure it: no PSI)
            values = [r[k] for r in reports if r.get(k) is not None]
            merged[k] = max(values) if values else None
    reasons = [f"{r.get('worker', '?')}: {r['reason']}" for r in reports if r.get("saturated")]
    merged.update(saturated=any(r.get("saturated") for r in reports), reason="; ".join(reasons) or None, workers=reports)
    return merged
