"""Running figures for the live view, updated from each flushed batch of records.

The same code serves a local run (batches from our own recorder) and a master
(batches from workers). It runs where the records are written: in the record
writer process (:mod:`loadtest.load.sink_worker`), which reports each touched
level back as plain figures (:meth:`LevelProgress.figures`); the timing process
holds them as :class:`LevelFigures` and never computes a percentile itself. It
works on whole Arrow columns with numpy, and keeps only a bounded sample per level.

The figures follow the analysis' definitions (``analysis/frame.py``), so that a
level's line during the run and its row in the final table say the same thing:
a level's requests are those started in its measured window (not in its
warm-up, not after its window ended, i.e. in the hold; :data:`WINDOW_ENDS`
brings the ends), less those the harness cancelled; a failed request enters
TTFT and e2e as +inf, so a percentile that reaches the failures reads ∞; an
open-loop request is timed from its scheduled time. What the live figures
still leave out: a cancelled request without a value (the analysis counts one
as a miss when its wait passed the SLO limit), and, in the lines printed while a
level runs, the requests still in flight (its closing line waits for its last
records: :meth:`loadtest.load.live.LiveView.level_changed`).
"""

from __future__ import annotations

import threading
from collections import Counter, deque

import numpy as np
import pyarrow as pa

from loadtest.analysis.failures import kinds_text
from loadtest.metric_registry import PERCENTILES
from loadtest.quantiles import quantile_sorted
from loadtest.token_gaps import list_gaps

#: A batch's key with each ended level's window end (wall s, by level index): the requests a level
#: started after it (in its hold) are not measured, as in the analysis (set by :class:`~loadtest.load.sink.RunSink`).
WINDOW_ENDS = "_window_ends"

#: The live samples a level keeps, by their short names (``ttft_ms`` → ``ttft``).
SAMPLED = ("ttft", "itl", "e2e")


def quantiles_with_failures(values: np.ndarray) -> dict[str, float]:
    """Each registry percentile of ``values``, where +inf (a failure) may be among them: the
    analysis' own definition (:func:`loadtest.quantiles.quantile_sorted`), so a level's live line
    and its row in the final table read the same percentile."""
    ordered = np.sort(np.asarray(values, dtype=float))
    return {name: quantile_sorted(ordered, q) for name, q in PERCENTILES.items()}


def _items_per_s(items: float, first_wall: float | None, last_wall: float | None) -> float | None:
    """Inputs served per second of the span the measured successes covered (None before two ends)."""
    if first_wall is None or last_wall is None or last_wall <= first_wall or not items:
        return None
    return items / (last_wall - first_wall)


class LevelProgress:
    """Counts and recent TTFT/ITL samples of one level; for an answer that is not streamed
    (embeddings, rerank, score: no first token), e2e samples and the inputs served per second."""

    __slots__ = ("concurrency", "requests", "errors", "error_kinds", "ttft", "itl", "rate_rps", "e2e", "items",
                 "first_wall", "last_wall")

    def __init__(self, concurrency: int, keep: int = 20_000, rate_rps: float | None = None) -> None:
        self.concurrency = concurrency
        #: Open loop: the level's offered rate (the level is a rate, not a number of users).
        self.rate_rps = rate_rps
        self.requests = 0
        self.errors = 0
        #: The measured failures by kind (``rate_limited``, ``timeout``, …): a live line names why, not only how many.
        self.error_kinds: Counter[str] = Counter()
        self.ttft: deque[float] = deque(maxlen=keep)
        self.itl: deque[float] = deque(maxlen=keep)
        self.e2e: deque[float] = deque(maxlen=keep)
        #: Inputs of the measured successful requests, and the wall span from the first one's start
        #: to the last one's end: the level's items/s so far.
        self.items = 0.0
        self.first_wall: float | None = None
        self.last_wall: float | None = None

    def percentiles(self, metric: str) -> dict[str, float | None]:
        """Each registry percentile (``p50``, ``p95``, …) of a sampled metric (``ttft``, ``itl``, ``e2e``)."""
        values = np.asarray(list(getattr(self, metric)), dtype=float)
        if not len(values):
            return {name: None for name in PERCENTILES}
        return dict(quantiles_with_failures(values))

    def figures(self) -> dict:
        """What the timing process shows of this level, as JSON-able values (see :class:`LevelFigures`)."""
        return {
            "concurrency": self.concurrency, "rate_rps": self.rate_rps, "requests": self.requests,
            "errors": self.errors, "error_kinds": dict(self.error_kinds), "items": self.items,
            "first_wall": self.first_wall, "last_wall": self.last_wall,
            "percentiles": {m: self.percentiles(m) for m in SAMPLED},
        }

    @classmethod
    def resumed(cls, figures: "LevelFigures") -> "LevelProgress":
        """Take over a level from the writer process's last report: the counts go on, the samples start afresh."""
        p = cls(figures.concurrency, rate_rps=figures.rate_rps)
        p.requests, p.errors, p.items = figures.requests, figures.errors, figures.items
        p.error_kinds = Counter(figures.error_kinds)
        p.first_wall, p.last_wall = figures.first_wall, figures.last_wall
        return p

    def p95(self) -> tuple[float | None, float | None]:
        return self.percentiles("ttft")["p95"], self.percentiles("itl")["p95"]

    def e2e_p95(self) -> float | None:
        return self.percentiles("e2e")["p95"]

    def items_per_s(self) -> float | None:
        """Inputs served per second of the span the measured successes covered (None before two ends)."""
        return _items_per_s(self.items, self.first_wall, self.last_wall)


class LevelFigures:
    """A level's progress as the record writer process last reported it: the same questions
    :class:`LevelProgress` answers, from figures it computed there (nothing to compute here)."""

    def __init__(self, figures: dict) -> None:
        self.concurrency = int(figures["concurrency"])
        self.rate_rps = figures.get("rate_rps")
        self.requests = int(figures["requests"])
        self.errors = int(figures["errors"])
        self.error_kinds: dict[str, int] = dict(figures.get("error_kinds") or {})
        self.items = float(figures.get("items") or 0.0)
        self.first_wall = figures.get("first_wall")
        self.last_wall = figures.get("last_wall")
        self._percentiles: dict[str, dict[str, float | None]] = figures.get("percentiles") or {}

    def percentiles(self, metric: str) -> dict[str, float | None]:
        return dict(self._percentiles.get(metric) or {name: None for name in PERCENTILES})

    def p95(self) -> tuple[float | None, float | None]:
        return self.percentiles("ttft")["p95"], self.percentiles("itl")["p95"]

    def e2e_p95(self) -> float | None:
        return self.percentiles("e2e")["p95"]

    def items_per_s(self) -> float | None:
        return _items_per_s(self.items, self.first_wall, self.last_wall)


class RunProgress:
    """Per-level progress of a run, fed with Arrow tables of records."""

    def __init__(self) -> None:
        self.levels: dict[int, LevelProgress] = {}
        self.total = 0
        self._lock = threading.Lock()

    def snapshot(self) -> list[tuple[int, "LevelProgress | LevelFigures"]]:
        with self._lock:
            return sorted(self.levels.items())

    def absorb(self, total: int, levels: dict) -> None:
        """Take the writer process's report: its run total, and the figures of the levels it touched."""
        with self._lock:
            self.total = total
            for index, figures in levels.items():
                self.levels[int(index)] = LevelFigures(figures)

    def figures(self, indexes) -> dict[int, dict]:
        """The figures of these levels (what the writer process reports after a batch)."""
        with self._lock:
            return {int(i): self.levels[int(i)].figures() for i in indexes if int(i) in self.levels}

    def update(self, table: pa.Table, window_ends: dict | None = None, arrived: int | None = None) -> list[int]:
        """Fold one batch of records in; returns the level indexes it touched.

        ``window_ends``: each ended level's window end (wall s, by index, :data:`WINDOW_ENDS`);
        a request its level started later (in the hold) is not measured, as in the analysis.
        ``arrived``: the records the batch brought, when ``table`` is what
        :class:`~loadtest.load.look_rows.RowsAwaitingLook` settled of it (the run total counts them all).
        """
        n = table.num_rows
        if arrived is not None:
            with self._lock:
                self.total += arrived - n  # the rows held back (or handed on from before) are counted on arrival
        if n == 0:
            return []
        index = table["level_index"].to_numpy()
        level = table["level"].to_numpy()
        kinds = table["error_kind"].to_numpy(zero_copy_only=False)
        ok = table["ok"].to_numpy(zero_copy_only=False)
        warmup = table["warmup"].to_numpy(zero_copy_only=False)
        cancelled = kinds == "cancelled"
        failed = ~ok.astype(bool) & ~cancelled  # the server's failures (a cancelled request is censored)
        # Open loop: a request is timed, and placed in its window, from its scheduled time (analysis/frame.py).
        lag = _column(table, "schedule_lag_ms")
        lag = np.zeros(n) if lag is None else np.nan_to_num(lag)
        ttft = _column(table, "ttft_ms") + lag
        ttft = np.where(np.isnan(ttft) & failed, np.inf, ttft)  # a failure without a first token missed every limit
        rates = table["rate_rps"].to_numpy(zero_copy_only=False) if "rate_rps" in table.column_names else None
        tokens = table["chunk_tokens"].combine_chunks() if "chunk_tokens" in table.column_names else None
        gaps, gap_rows = list_gaps(table["chunk_ms"].combine_chunks(), tokens)
        e2e = _column(table, "e2e_ms")
        items = _column(table, "items")
        start = _column(table, "start_wall")
        scheduled = start - lag / 1000.0 if start is not None else None
        ends = {int(k): float(v) for k, v in (window_ends or {}).items()}
        with self._lock:
            self.total += n
            touched = [int(i) for i in np.unique(index)]
            for i in touched:
                rows = index == i
                p = self.levels.get(int(i))
                if isinstance(p, LevelFigures):  # the writer process is gone: this process goes on from its report
                    p = self.levels[int(i)] = LevelProgress.resumed(p)
                if p is None:
                    rate = rates[rows][0] if rates is not None else None
                    rate = float(rate) if rate is not None and rate == rate else None
                    p = self.levels[int(i)] = LevelProgress(int(level[rows][0]), rate_rps=rate)
                measured = rows & ~warmup
                if scheduled is not None and int(i) in ends:
                    measured &= scheduled < ends[int(i)]  # started in the hold: keeps the load, not measured
                counted = measured & ~cancelled
                p.requests += int(np.sum(counted))
                lost = counted & failed
                if lost.any():  # by kind (a Python loop over the failures only: none in a healthy batch)
                    p.errors += int(np.sum(lost))
                    p.error_kinds.update("unknown" if k is None else str(k) for k in kinds[lost])
                values = ttft[measured]
                p.ttft.extend(values[~np.isnan(values)].tolist())
                p.itl.extend(gaps[measured[gap_rows]].tolist())
                if e2e is not None:
                    timed = e2e + lag
                    p.e2e.extend(np.where(failed, np.inf, timed)[counted & (failed | np.isfinite(timed))].tolist())
                    served = measured & ok & np.isfinite(e2e)
                    if items is not None and start is not None and served.any():
                        p.items += float(np.nansum(items[served]))
                        ends_wall = start[served] + e2e[served] / 1000.0
                        first, last = float(np.min(start[served])), float(np.max(ends_wall))
                        p.first_wall = first if p.first_wall is None else min(p.first_wall, first)
                        p.last_wall = last if p.last_wall is None else max(p.last_wall, last)
        return touched


def errors_text(errors: int, kinds: dict[str, int], *, joined: str = " (") -> str:
    """``12 errors (rate_limited 10, timeout 2)``: how many, and the commonest kinds (three at most).

    ``joined``: what sits between the count and the kinds (``": "`` inside a bracket the caller closes)."""
    said = f"{errors} error{'' if errors == 1 else 's'}"
    if not errors or not kinds:
        return said
    return said + joined + kinds_text(kinds) + (")" if joined == " (" else "")


def _column(table: pa.Table, name: str) -> np.ndarray | None:
    """A numeric column as floats (NaN for null), or None when the batch has no such column."""
    if name not in table.column_names:
        return None
    return table[name].to_numpy(zero_copy_only=False).astype(float)
