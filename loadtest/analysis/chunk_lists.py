"""The chunk lists of a run, batch by batch: where :mod:`chunk_pass` reads ``chunk_ms`` and ``chunk_tokens``.

A run's chunk timestamps are the bulk of its records (a 3-hour soak at 200
streams holds 100M of them), so the analysis never holds them all at once:
it reads them as :class:`ListBatch` es, the flattened lists of consecutive
records, from a :data:`ChunkSource`. Two sources exist:

* :func:`arrow_source`: Arrow record batches, e.g. read from
  ``requests.parquet`` a few thousand rows at a time (``analyze_run``);
* :func:`frame_source`: a DataFrame that already holds the list columns (the
  records of a live run, tests), as one batch.

A batch can be narrowed to some of its rows (:meth:`ListBatch.rows`, for the
per-class analysis) and cut at the hold's end (:meth:`ListBatch.cut`, the list
half of :mod:`hold_cut`), with the same rules row for row as the DataFrame
versions, so the analysis gives the same figures whichever source it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa

from loadtest.analysis.columns import flatten_arrow, flatten_list



@dataclass(frozen=True)
class ListBatch:
    """``chunk_ms`` and ``chunk_tokens`` of consecutive records, flattened (values, and each row's length)."""

    arrival: np.ndarray  # float64: every row's chunk_ms, row after row
    lengths: np.ndarray  # int64 per row (a null list has 0)
    tokens: np.ndarray  # chunk_tokens values as stored (int, or float with NaN for null items)
    token_lengths: np.ndarray  # int64 per row

    def __len__(self) -> int:
        return len(self.lengths)

    def rows(self, mask: np.ndarray) -> ListBatch:
        """Only the rows where ``mask`` (one bool per row) is true, in their order."""
        if mask.all():
            return self
        return ListBatch(
            self.arrival[np.repeat(mask, self.lengths)],
            self.lengths[mask],
            self.tokens[np.repeat(mask, self.token_lengths)],
            self.token_lengths[mask],
        )

    def cut(self, at_ms: np.ndarray) -> ListBatch:
        """Rows with a finite ``at_ms`` keep only the chunks that arrived by then (see :mod:`hold_cut`).

        Row for row what ``hold_cut._cut_row`` does to a DataFrame's lists: a
        chunk is kept if ``chunk_ms ≤ at_ms``, and the token list is cut with
        the same mask (a shorter token list with its first entries).
        """
        rows = np.flatnonzero(np.isfinite(at_ms))
        if not len(rows):
            return self
        a_off = np.concatenate([[0], np.cumsum(self.lengths)])
        t_off = np.concatenate([[0], np.cumsum(self.token_lengths)])
        lengths, token_lengths = self.lengths.copy(), self.token_lengths.copy()
        arrival: list[np.ndarray] = []
        tokens: list[np.ndarray] = []
        a_done = t_done = 0
        for r in rows.tolist():
            a0, a1, t0, t1 = int(a_off[r]), int(a_off[r + 1]), int(t_off[r]), int(t_off[r + 1])
            arrival.append(self.arrival[a_done:a0])
            tokens.append(self.tokens[t_done:t0])
            times = self.arrival[a0:a1]
            keep = times <= at_ms[r]
            arrival.append(times[keep])
            if t1 > t0:
                mine = self.tokens[t0:t1].astype(float)
                with np.errstate(invalid="ignore"):  # a null token count: as hold_cut's astype(int) makes of it
                    tokens.append(mine[: len(keep)][keep[: len(mine)]].astype(int))
            lengths[r] = len(arrival[-1])
            token_lengths[r] = len(tokens[-1]) if t1 > t0 else 0
            a_done, t_done = a1, t1
        arrival.append(self.arrival[a_done:])
        tokens.append(self.tokens[t_done:])
        return ListBatch(np.concatenate(arrival), lengths, np.concatenate(tokens), token_lengths)


#: Yields the :class:`ListBatch` es of every record, in record order; each call starts again.
ChunkSource = Callable[[], Iterator[ListBatch]]


def frame_source(requests: pd.DataFrame) -> ChunkSource:
    """The list columns of a DataFrame (absent columns: empty lists), as one batch."""

    def batches() -> Iterator[ListBatch]:
        arrival, lengths = flatten_list(requests, "chunk_ms", np.float64)
        tokens, token_lengths = flatten_list(requests, "chunk_tokens", None)
        yield ListBatch(arrival, lengths, tokens, token_lengths)

    return batches


def arrow_batch(batch: pa.RecordBatch | pa.Table) -> ListBatch:
    """One Arrow batch's list columns as a :class:`ListBatch` (absent columns: empty lists)."""
    names = batch.schema.names
    empty = (np.empty(0), np.zeros(batch.num_rows, dtype=np.int64))
    arrival, lengths = flatten_arrow(batch.column("chunk_ms"), np.float64) if "chunk_ms" in names else empty
    tokens, token_lengths = flatten_arrow(batch.column("chunk_tokens"), None) if "chunk_tokens" in names else empty
    return ListBatch(arrival, lengths, tokens, token_lengths)


def arrow_source(batches: Callable[[], Iterable[pa.RecordBatch]]) -> ChunkSource:
    """Arrow record batches (re-read on every call, e.g. from a Parquet file) as :class:`ListBatch` es."""

    def listed() -> Iterator[ListBatch]:
        for batch in batches():
            yield arrow_batch(batch)

    return listed
