"""Running figures for the live view, updated from each flushed batch of records.

The same code serves a local run (batches from our own recorder) and a master
(batches from workers). It runs in the sink's background thread, works on
whole Arrow columns with numpy, and keeps only a bounded sample per level.
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np
import pyarrow as pa


def list_gaps(arr: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """Differences between consecutive values inside each list, and each gap's row."""
    if len(arr) == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    offsets = arr.offsets.to_numpy()
    values = arr.values.to_numpy(zero_copy_only=False)[offsets[0] : offsets[-1]]
    offsets = offsets - offsets[0]
    lengths = np.diff(offsets)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    if len(values) < 2:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    gaps = np.diff(values)
    same_row = rows[1:] == rows[:-1]
    return gaps[same_row], rows[1:][same_row]


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
        return f"{self.rate_rps:g} req/s" if self.rate_rps is not None else f"{self.concurrency} users"

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
        if self.first_wall is None or self.last_wall is None or self.last_wall <= self.first_wall or not self.items:
            return None
        return self.items / (self.last_wall - self.first_wall)


class RunProgress:
    """Per-level progress of a run, fed with Arrow tables of records."""

    def __init__(self) -> None:
        self.levels: dict[int, LevelProgress] = {}
        self.total = 0
        self._lock = threading.Lock()

    def snapshot(self) -> list[tuple[int, LevelProgress]]:
        with self._lock:
            return sorted(self.levels.items())

    def update(self, table: pa.Table) -> None:
        n = table.num_rows
        if n == 0:
            return
        index = table["level_index"].to_numpy()
        level = table["level"].to_numpy()
        kinds = table["error_kind"].to_numpy(zero_copy_only=False)
        ok = table["ok"].to_numpy(zero_copy_only=False)
        warmup = table["warmup"].to_numpy(zero_copy_only=False)
        ttft = table["ttft_ms"].to_numpy(zero_copy_only=False).astype(float)
        cancelled = kinds == "cancelled"
        rates = table["rate_rps"].to_numpy(zero_copy_only=False) if "rate_rps" in table.column_names else None
        gaps, gap_rows = list_gaps(table["chunk_ms"].combine_chunks())
        e2e = table["e2e_ms"].to_numpy(zero_copy_only=False).astype(float) if "e2e_ms" in table.column_names else None
        items = table["items"].to_numpy(zero_copy_only=False).astype(float) if "items" in table.column_names else None
        start = table["start_wall"].to_numpy(zero_copy_only=False).astype(float) if "start_wall" in table.column_names else None
        with self._lock:
            self.total += n
            for i in np.unique(index):
                rows = index == i
                p = self.levels.get(int(i))
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
