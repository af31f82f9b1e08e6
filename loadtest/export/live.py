"""``--metrics-port``: the load generator's own Prometheus metrics while it runs.

Fed off the hot path: the histograms are filled from the batches of finished
records that the process owning the run folder already receives (once a second
per process), bucketed by the record writer process (:func:`observation`, in
:mod:`loadtest.load.sink_worker`) or, should it stop, the sink's background
thread; never per chunk in the timing greenlets. On a distributed run that is the master, so one scrape sees every
worker's requests. Each batch's bucket counts go to a queue, which :meth:`collect`
folds in; :mod:`loadtest.export.serve` renders the text in the same thread, so a
scrape costs the event loop nothing.

Exported (each with the label ``scenario``; per-request series also ``level`` and ``class``):

- ``loadtest_ttft_seconds``, ``loadtest_itl_seconds``, ``loadtest_e2e_seconds``: histograms
  of the requests the analysis measures, as far as a live count can know them (:func:`observation`):
  not warm-up, not started after their level's window ended (in the hold) when the record arrives
  after that end; a request the harness cancelled keeps what it observed (a TTFT) but has no e2e
  (censored: it was cut, not finished); open loop timed from the scheduled time. A failure is +∞ as in
  the analysis (its e2e, and its TTFT unless it saw a first token): the ``+Inf`` bucket, its time until
  it failed in the sum;
- ``loadtest_requests_total{outcome}``: every finished request, ``ok`` or its error kind
  (``timeout``, ``rate_limited``, ``http_error``, …), warm-up included;
- ``loadtest_users``: closed loop, the users running now; open loop and trace replay, whose
  users are ``max_in_flight`` mostly idle senders, the requests in flight (as ``loadtest_in_flight``);
- ``loadtest_in_flight``: requests being sent now, over every process (their latest snapshots,
  up to a second old);
- ``loadtest_level``: the level in force (users, or requests/s in open loop; 0 between levels)
  and ``loadtest_level_index``;
- ``loadtest_level_verdict{level,verdict}``: 1 for each ended level's verdict
  (``pass``/``fail``/``uncertain``/``no_data``).
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from loadtest.token_gaps import list_gaps

TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0,
                20.0, 30.0, 60.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
               0.5, 1.0, 2.5)
E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0)
HISTOGRAMS = {"loadtest_ttft_seconds": TTFT_BUCKETS, "loadtest_itl_seconds": ITL_BUCKETS,
              "loadtest_e2e_seconds": E2E_BUCKETS}
HELP = {
    "loadtest_ttft_seconds": "Time to first token of measured requests, as the load generator timed it",
    "loadtest_itl_seconds": "Inter-token latency of measured requests: each gap between content chunks over the later chunk's tokens",
    "loadtest_e2e_seconds": "Request time, send to last byte, of measured requests",
}
METRIC_NAMES = (*HISTOGRAMS, "loadtest_requests_total", "loadtest_users", "loadtest_in_flight", "loadtest_level",
                "loadtest_level_index", "loadtest_level_verdict")
VERDICTS = ("pass", "fail", "uncertain", "no_data")


def _level_label(table: pa.Table) -> np.ndarray:
    """Users (closed loop) or requests/s (open loop), as the label text."""
    level = table.column("level").to_numpy(zero_copy_only=False)
    rate = table.column("rate_rps").to_numpy(zero_copy_only=False).astype(float)
    return np.array([f"{r:g}" if r == r else str(int(l)) for l, r in zip(level, rate)], dtype=object)


def _itl_seconds(table: pa.Table, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each per-token gap (s) of the selected requests, and the request each belongs to (:mod:`loadtest.token_gaps`)."""
    index = pa.array(rows, type=pa.int64())
    chunks = table.column("chunk_ms").combine_chunks().take(index)
    tokens = table.column("chunk_tokens").combine_chunks().take(index) if "chunk_tokens" in table.column_names else None
    gaps, owner = list_gaps(chunks, tokens)
    return gaps / 1000.0, rows[owner]


def _measured(table: pa.Table, window_ends: dict | None) -> np.ndarray:
    """Which records the analysis would measure, as far as known now (a cancelled one included).

    The live view's rule (:meth:`loadtest.load.progress.RunProgress.update`), so a dashboard's
    percentiles are taken over the requests the report's are: not warm-up; not started, by its
    scheduled time in open loop, after its level's window ended (the hold's arrivals, which keep
    the load but are not measured). A window's end is known only once the level has ended, and a
    record started in the hold finishes after it, so that test misses nothing the batch could have
    been held to (``window_ends`` is read when the batch is handed over).
    """
    n = table.num_rows
    measured = ~table.column("warmup").to_numpy(zero_copy_only=False).astype(bool)
    ends = {int(k): float(v) for k, v in (window_ends or {}).items()}
    if ends:
        index = table.column("level_index").to_numpy(zero_copy_only=False)
        start = table.column("start_wall").to_numpy(zero_copy_only=False).astype(float)
        scheduled = start - _lag_ms(table) / 1000.0
        end = np.array([ends.get(int(i), np.inf) for i in index], dtype=float) if n else np.empty(0)
        measured &= ~(scheduled >= end)
    return measured


def _lag_ms(table: pa.Table) -> np.ndarray:
    """Open loop: each record's send lag (ms; 0 where none), which the analysis adds to TTFT and e2e."""
    if "schedule_lag_ms" not in table.column_names:
        return np.zeros(table.num_rows)
    return np.nan_to_num(table.column("schedule_lag_ms").to_numpy(zero_copy_only=False).astype(float))


def observation(table: pa.Table, window_ends: dict | None = None) -> tuple[dict, list] | None:
    """One batch of records bucketed: (requests by (level, class, outcome), histogram updates), None if empty.

    ``loadtest_requests_total`` counts every record; the histograms only the measured ones
    (:func:`_measured`; ``window_ends``: each ended level's window end, wall s by level index,
    :data:`loadtest.load.progress.WINDOW_ENDS`), and as the analysis does, a request the harness
    cancelled gives its TTFT if it saw one but no e2e. TTFT and e2e are timed as the analysis times
    them: an open-loop request from its scheduled time (its send lag added).

    Vectorised: each (level, class) pair gets an integer code and one ``bincount`` per
    histogram counts every sample, so the cost grows with the samples, not the series.
    A pure function of the table, so the record writer process (:mod:`loadtest.load.sink_worker`)
    can compute it where the table is decoded, and send it back (:func:`observation_to_json`).
    """
    if table.num_rows == 0:
        return None
    levels = _level_label(table)
    classes = np.array(["" if c is None else c for c in table.column("class").to_pylist()], dtype=object)
    ok = table.column("ok").to_numpy(zero_copy_only=False).astype(bool)
    kinds = table.column("error_kind").to_pylist()
    outcome = np.array(["ok" if good else (kind or "error") for good, kind in zip(ok, kinds)], dtype=object)
    counts = collections.Counter(zip(levels, classes, outcome))
    series, code = np.unique(np.char.add(np.char.add(levels.astype(str), "\x1f"), classes.astype(str)),
                             return_inverse=True)
    series_keys = [tuple(k.split("\x1f", 1)) for k in series]
    measured = _measured(table, window_ends)
    # cut by the harness (at the run's end, or a hold's): censored, so its e2e (the time until the cut) is no sample
    cancelled = outcome == "cancelled"
    failed = ~ok & ~cancelled
    lag = _lag_ms(table)
    # what a failure saw before it failed (a dropped arrival: nothing), for the histograms' sums
    until_failed = np.nan_to_num(table.column("e2e_ms").to_numpy(zero_copy_only=False).astype(float) + lag) / 1000.0
    samples = {}
    for name, column, take in (("loadtest_ttft_seconds", "ttft_ms", measured),
                               ("loadtest_e2e_seconds", "e2e_ms", measured & ~cancelled)):
        values = (table.column(column).to_numpy(zero_copy_only=False).astype(float) + lag) / 1000.0
        # A failure is +inf, as the analysis counts it (its e2e; its TTFT unless it saw a first token): the
        # +Inf bucket, so histogram_quantile agrees with summary.json. A failed e2e was its time until the
        # failure (a dropped arrival's 0 s made an overloaded level's e2e p95 look fast).
        lost = failed & (np.isnan(values) if column == "ttft_ms" else True)
        values = np.where(lost, np.inf, values)
        keep = take & ~np.isnan(values)
        samples[name] = (values[keep], np.flatnonzero(keep))
    samples["loadtest_itl_seconds"] = _itl_seconds(table, np.flatnonzero(measured & ok))
    update = []
    for name, (values, rows) in samples.items():
        if not len(values):
            continue
        width = len(HISTOGRAMS[name]) + 1
        slot = np.searchsorted(np.asarray(HISTOGRAMS[name]), values, side="left")  # le: an edge value is in its bucket
        owner = code[rows]
        bins = np.bincount(owner * width + slot, minlength=len(series) * width).reshape(len(series), width)
        # a failure's +inf would make the sum +Inf for good: it adds the time until it failed (a lower bound)
        weights = np.where(np.isinf(values), until_failed[rows], values)
        sums = np.bincount(owner, weights=weights, minlength=len(series))
        for i in np.unique(owner):
            update.append((name, series_keys[i], bins[i], float(sums[i])))
    return counts, update


def observation_to_json(observed: tuple[dict, list]) -> dict:
    """An observation as JSON values (the writer process's answer carries it)."""
    counts, update = observed
    return {"counts": [[*key, n] for key, n in counts.items()],
            "update": [[name, list(series), [int(b) for b in bins], total] for name, series, bins, total in update]}


def observation_from_json(data: dict) -> tuple[dict, list]:
    """The observation :func:`observation_to_json` sent: the same counts, bins and sums."""
    counts = {(level, cls, outcome): n for level, cls, outcome, n in data["counts"]}
    update = [(name, tuple(series), np.asarray(bins, dtype=np.int64), float(total)) for name, series, bins, total in data["update"]]
    return counts, update


class LiveMetrics:
    """A Prometheus collector over the records of one run."""

    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self._queue: collections.deque = collections.deque()
        # (metric, level, class) -> [bucket counts (non-cumulative, +Inf last), sum]
        self._hist: dict[tuple[str, str, str], list[Any]] = {}
        self._requests: dict[tuple[str, str, str], float] = collections.defaultdict(float)
        self._verdicts: dict[str, str] = {}
        self.level: float = 0.0
        self.level_index: int = -1
        #: Closed loop: the users running; open loop: the requests in flight (see the module doc).
        self.users: Callable[[], int] = lambda: 0
        self.in_flight: Callable[[], int] = lambda: 0

    # -- fed by the sink's thread -----------------------------------------------------------------

    def observe(self, table: pa.Table, window_ends: dict | None = None) -> None:
        """Bucket one batch of records (called off the event loop); a scrape folds it in."""
        self.take(observation(table, window_ends))

    def take(self, observed: tuple[dict, list] | None) -> None:
        """Queue a batch already bucketed (:func:`observation`, here or in the record writer process)."""
        if observed is not None:
            self._queue.append(observed)

    # -- told by the run --------------------------------------------------------------------------

    def level_changed(self, previous: Any, current: Any) -> None:
        if previous is not None:
            verdict = (previous.decision or {}).get("verdict")
            if verdict:
                self._verdicts[self._span_label(previous)] = verdict
        if current is None:
            self.level, self.level_index = 0.0, -1
        else:
            self.level = float(current.rate_rps if current.rate_rps is not None else current.concurrency)
            self.level_index = current.index

    @staticmethod
    def _span_label(span: Any) -> str:
        return f"{span.rate_rps:g}" if span.rate_rps is not None else str(span.concurrency)

    # -- read by a scrape -------------------------------------------------------------------------

    def _fold(self) -> None:
        while self._queue:
            counts, update = self._queue.popleft()
            for (level, cls, outcome), n in counts.items():
                self._requests[(level, cls, outcome)] += n
            for name, (level, cls), bins, total in update:
                entry = self._hist.setdefault((name, level, cls), [np.zeros(len(bins), dtype=np.int64), 0.0])
                entry[0] += bins
                entry[1] += total

    def collect(self) -> Iterator[Any]:
        # prometheus_client: only when a live /metrics endpoint is served
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        self._fold()
        for name, edges in HISTOGRAMS.items():
            fam = HistogramMetricFamily(name, HELP[name], labels=["scenario", "level", "class"])
            for (metric, level, cls), (bins, total) in sorted(self._hist.items()):
                if metric != name:
                    continue
                cumulative = np.cumsum(bins)
                buckets = [(f"{e:g}", float(c)) for e, c in zip(edges, cumulative[:-1])] + [("+Inf", float(cumulative[-1]))]
                fam.add_metric([self.scenario, level, cls], buckets, total)
            yield fam
        req = CounterMetricFamily("loadtest_requests", "Finished requests by outcome (ok or the error kind)",
                                  labels=["scenario", "level", "class", "outcome"])
        for (level, cls, outcome), n in sorted(self._requests.items()):
            req.add_metric([self.scenario, level, cls, outcome], n)
        yield req
        for name, text, value in (
            ("loadtest_users", "Users running now (closed loop); requests in flight (open loop, trace replay)",
             self._read(self.users)),
            ("loadtest_in_flight", "Requests being sent now, over every process", self._read(self.in_flight)),
            ("loadtest_level", "The level in force: users, or requests/s in open loop (0 between levels)", self.level),
            ("loadtest_level_index", "Position of the level in force in the run (-1 between levels)", self.level_index),
        ):
            g = GaugeMetricFamily(name, text, labels=["scenario"])
            g.add_metric([self.scenario], value)
            yield g
        v = GaugeMetricFamily("loadtest_level_verdict", "1 for the verdict of each ended level",
                              labels=["scenario", "level", "verdict"])
        for level, verdict in self._verdicts.items():
            for option in VERDICTS:
                v.add_metric([self.scenario, level, option], 1.0 if option == verdict else 0.0)
        yield v

    @staticmethod
    def _read(gauge: Callable[[], int]) -> float:
        try:
            return float(gauge())
        except Exception:  # the runner is gone (the run is closing)
            return 0.0
