"""Running figures for the live view, updated from each flushed batch of records.

The same code serves a local run (batches from our own recorder) and a master
(batches from workers), and it works on Arrow columns, so the per-request hot
path never pays for the live view.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def list_gaps(column: pa.ChunkedArray | pa.ListArray) -> np.ndarray:
    """Differences between consecutive values inside each list (never across lists)."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(arr) == 0:
        return np.zeros(0)
    offsets = arr.offsets.to_numpy()
    values = arr.values.to_numpy(zero_copy_only=False)[offsets[0] : offsets[-1]]
    offsets = offsets - offsets[0]
    if len(values) < 2:
        return np.zeros(0)
    gaps = np.diff(values)
    starts = offsets[1:-1]  # index in values where a new list begins
    keep = np.ones(len(gaps), dtype=bool)
    keep[starts[(starts > 0) & (starts <= len(gaps))] - 1] = False
    return gaps[keep]


class LevelProgress:
    """Counts and recent TTFT/ITL samples of one level."""

    __slots__ = ("concurrency", "requests", "errors", "ttft", "itl")

    def __init__(self, concurrency: int, keep: int = 20_000) -> None:
        self.concurrency = concurrency
        self.requests = 0
        self.errors = 0
        self.ttft: deque[float] = deque(maxlen=keep)
        self.itl: deque[float] = deque(maxlen=keep)

    def p95(self) -> tuple[float | None, float | None]:
        ttft = float(np.percentile(np.fromiter(self.ttft, float), 95)) if self.ttft else None
        itl = float(np.percentile(np.fromiter(self.itl, float), 95)) if self.itl else None
        return ttft, itl


class RunProgress:
    """Per-level progress of a run, fed with Arrow tables of records."""

    def __init__(self) -> None:
        self.levels: dict[int, LevelProgress] = {}
        self.total = 0

    def update(self, table: pa.Table) -> None:
        self.total += table.num_rows
        indexes = table["level_index"].to_numpy()
        for index in np.unique(indexes):
            rows = table.filter(pc.equal(table["level_index"], pa.scalar(int(index), pa.int32())))
            level = int(rows["level"][0].as_py())
            p = self.levels.get(int(index))
            if p is None:
                p = self.levels[int(index)] = LevelProgress(level)
            cancelled = pc.fill_null(pc.equal(rows["error_kind"], "cancelled"), False)
            p.requests += rows.num_rows - pc.sum(cancelled).as_py() if rows.num_rows else 0
            p.errors += pc.sum(pc.and_(pc.invert(rows["ok"]), pc.invert(cancelled))).as_py() or 0
            measured = rows.filter(pc.invert(rows["warmup"]))
            ttft = measured["ttft_ms"].to_numpy(zero_copy_only=False)
            p.ttft.extend(ttft[np.isfinite(ttft)].tolist())
            p.itl.extend(list_gaps(measured["chunk_ms"]).tolist())
