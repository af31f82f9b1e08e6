"""Rows a level's open look has yet to place: in its window, or in its hold.

Why this exists: a look that ends a level ends its window at the look's own
instant (``span.end_wall = span.looked_at``, :mod:`loadtest.load.shape`), so the
saved run holds exactly what the verdict was taken on. The judge takes a while
to answer, and meanwhile the event loop keeps recording: a short request that
started after the look and ended before the verdict reaches the live figures
while its level still has no end. Folded in then, it counted as measured
though it started in the hold (a trial's open-loop line read 35 requests
against the table's 31).

So each batch also carries the looks still being judged (:data:`LOOKS_OPEN`,
the level's index and the look's wall time), and a row of such a level that
was scheduled at or after its look waits here. At a later batch the look has
an answer: the level ended (its window end is known and the row is a hold
row, which the figures leave out by :data:`~loadtest.load.progress.WINDOW_ENDS`)
or it goes on (the row is measured). Either way the row is handed on then.

Only the live figures wait: every row is stored as it arrives. A row still
waiting when the input ends (a run stopped during a look) never reaches the
figures; it was after the last verdict, so no measured figure is missing.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

#: A batch's key with each level whose look is being judged: its wall time (s, by level index).
LOOKS_OPEN = "_looks_open"


def _scheduled(table: pa.Table) -> np.ndarray:
    """Each row's scheduled wall time: its start less its send lag (open loop), as the analysis places it."""
    start = table.column("start_wall").to_numpy(zero_copy_only=False).astype(float)
    if "schedule_lag_ms" not in table.column_names:
        return start
    lag = np.nan_to_num(table.column("schedule_lag_ms").to_numpy(zero_copy_only=False).astype(float))
    return start - lag / 1000.0


class RowsAwaitingLook:
    """Holds the rows an open look has yet to place, and hands them on once it has answered."""

    def __init__(self) -> None:
        self._waiting: pa.Table | None = None

    def settle(self, table: pa.Table, window_ends: dict | None, looks_open: dict | None) -> pa.Table:
        """The rows whose place is known now: those that waited and are placed, then this batch's.

        ``window_ends`` and ``looks_open`` are the batch's, read when it was handed over (a level
        whose end is known has no open look: its end decides).
        """
        if self._waiting is not None:
            table = pa.concat_tables([self._waiting, table])
            self._waiting = None
        opened = {int(k): float(v) for k, v in (looks_open or {}).items()}
        for ended in (window_ends or {}):
            opened.pop(int(ended), None)
        if not opened or table.num_rows == 0:
            return table
        index = table.column("level_index").to_numpy(zero_copy_only=False)
        look = np.array([opened.get(int(i), np.inf) for i in index], dtype=float)
        wait = _scheduled(table) >= look
        if not wait.any():
            return table
        self._waiting = table.filter(pa.array(wait))
        return table.filter(pa.array(~wait))
