"""Running figures for the live view, updated from each flushed batch of records.

The same code serves a local run (batches from our own recorder) and a master
(batches from workers). It runs where the records are written: in the record
writer process (:mod:`loadtest.load.sink_worker`), which reports each touched
level back as plain figures (:meth:`LevelProgress.figures`); the timing process
holds them as :class:`LevelFigures` and never computes a percentile itself. It
works on whole Arrow columns with numpy, and keeps only a bounded sample per level.
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np
import pyarrow as pa

from loadtest.metric_registry import PERCENTILES
from loadtest.token_gaps import list_gaps

#: The live samples a level keeps, by their short names (``ttft_ms`` → ``ttft``).
SAMPLED = ("ttft", "itl", "e2e")
_QS = [q * 100 for q in PERCENTILES.values()]


def _items_per_s(items: float, first_wall: float | None, last_wall: float | None) -> float | None:
    """Inputs served per second of the span the measured successes covered (None before two ends)."""
    if first_wall is None or last_wall is None or last_wall <= first_wall or not items:
        return None
    return items / (last_wall - first_wall)


def _label(concurrency: int, rate_rps: float | None) -> str:
    return f"{rate_rps:g} req/s" if rate_rps is not None else f"{concurrency} users"


class LevelProgress:
    """Counts and recent TTFT/ITL samples of one level; for an answer that is not streamed
    (embeddings, rerank, score: no first token), e2e samples and the inputs served per second."""

    __slots__ = ("concurrency", "requests", "errors", "ttft", "itl", "rate_rps", "e2e", "items", "first_wall", "last_wall")

    def __init__(self, concurrency: int, keep: int = 20_000, rate_rps: float | None = None) -> None:
        self.concurrency = concurrency
        #: Open loop: the level's offered rate (the level is a rate, not a number of users).
        self.rate_rps = rate_rps
        self.requests = 0
        self.errors = 0
        self.ttft: deque[float] = deque(maxlen=keep)
        self.itl: deque[float] = deque(maxlen=keep)
        self.e2e: deque[float] = deque(maxlen=keep)
        #: Inputs of the measured successful requests, and the wall span from the first one's start
        #: to the last one's end: the level's items/s so far.
        self.items = 0.0
        self.first_wall: float | None = None
        self.last_wall: float | None = None

    @property
    def label(self) -> str:
        """``"8 users"`` or ``"12.5 req/s"``."""
        return _label(self.concurrency, self.rate_rps)

    def percentiles(self, metric: str) -> dict[str, float | None]:
        """Each registry percentile (``p50``, ``p95``, …) of a sampled metric (``ttft``, ``itl``, ``e2e``)."""
        values = np.asarray(list(getattr(self, metric)), dtype=float)
        if not len(values):
            return {name: None for name in PERCENTILES}
        return dict(zip(PERCENTILES, (float(v) for v in np.percentile(values, _QS))))

    def figures(self) -> dict:
        """What the timing process shows of this level, as JSON-able values (see :class:`LevelFigures`)."""
        return {
            "concurrency": self.concurrency, "rate_rps": self.rate_rps, "requests": self.requests,
            "errors": self.errors, "items": self.items, "first_wall": self.first_wall, "last_wall": self.last_wall,
            "percentiles": {m: self.percentiles(m) for m in SAMPLED},
        }

    @classmethod
    def resumed(cls, figures: "LevelFigures") -> "LevelProgress":
        """Take over a level from the writer process's last report: the counts go on, the samples start afresh."""
        p = cls(figures.concurrency, rate_rps=figures.rate_rps)
        p.requests, p.errors, p.items = figures.requests, figures.errors, figures.items
        p.first_wall, p.last_wall = figures.first_wall, figures.last_wall
        return p

    def p95(self) -> tuple[float | None, float | None]:
        ttft = list(self.ttft)
        itl = list(self.itl)
        return (
            float(np.percentile(ttft, 95)) if ttft else None,
            float(np.percentile(itl, 95)) if itl else None,
        )

    def e2e_p95(self) -> float | None:
        e2e = list(self.e2e)
        return float(np.percentile(e2e, 95)) if e2e else None

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
        self.items = float(figures.get("items") or 0.0)
        self.first_wall = figures.get("first_wall")
        self.last_wall = figures.get("last_wall")
        self._percentiles: dict[str, dict[str, float | None]] = figures.get("percentiles") or {}

    @property
    def label(self) -> str:
        return _label(self.concurrency, self.rate_rps)

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

    def update(self, table: pa.Table) -> list[int]:
        """Fold one batch of records in; returns the level indexes it touched."""
        n = table.num_rows
        if n == 0:
            return []
        index = table["level_index"].to_numpy()
        level = table["level"].to_numpy()
        kinds = table["error_kind"].to_numpy(zero_copy_only=False)
        ok = table["ok"].to_numpy(zero_copy_only=False)
        warmup = table["warmup"].to_numpy(zero_copy_only=False)
        ttft = table["ttft_ms"].to_numpy(zero_copy_only=False).astype(float)
        cancelled = kinds == "cancelled"
        rates = table["rate_rps"].to_numpy(zero_copy_only=False) if "rate_rps" in table.column_names else None
        tokens = table["chunk_tokens"].combine_chunks() if "chunk_tokens" in table.column_names else None
        gaps, gap_rows = list_gaps(table["chunk_ms"].combine_chunks(), tokens)
        e2e = table["e2e_ms"].to_numpy(zero_copy_only=False).astype(float) if "e2e_ms" in table.column_names else None
        items = table["items"].to_numpy(zero_copy_only=False).astype(float) if "items" in table.column_names else None
        start = table["start_wall"].to_numpy(zero_copy_only=False).astype(float) if "start_wall" in table.column_names else None
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
                p.requests += int(np.sum(rows & ~cancelled))
                p.errors += int(np.sum(rows & ~ok & ~cancelled))
                measured = rows & ~warmup
                values = ttft[measured]
                p.ttft.extend(values[np.isfinite(values)].tolist())
                p.itl.extend(gaps[measured[gap_rows]].tolist())
                if e2e is not None:
                    served = measured & ok & np.isfinite(e2e)
                    p.e2e.extend(e2e[served].tolist())
                    if items is not None and start is not None and served.any():
                        p.items += float(np.nansum(items[served]))
                        ends = start[served] + e2e[served] / 1000.0
                        first, last = float(np.min(start[served])), float(np.max(ends))
                        p.first_wall = first if p.first_wall is None else min(p.first_wall, first)
                        p.last_wall = last if p.last_wall is None else max(p.last_wall, last)
        return touched
