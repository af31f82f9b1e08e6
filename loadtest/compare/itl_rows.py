"""Per-token ITL samples of some windows, with the request each came from, read batch by batch.

``loadtest compare`` resamples requests, so every ITL sample keeps its owner
(see :mod:`loadtest.compare.samples`). Built over a whole run at once
(:func:`loadtest.analysis.chunks.itl_samples_with_rows` on
:func:`~loadtest.analysis.chunks.flatten_chunks`), that meant holding every
chunk timestamp of both runs as pandas arrays, then again flattened: ~9 GB for
a run of 100M. Here the chunk lists come from a
:data:`~loadtest.analysis.chunk_lists.ChunkSource`, a batch at a time (from
``requests.parquet``: :func:`loadtest.records_stream.chunk_batches`), the way
the analyzer's :mod:`~loadtest.analysis.chunk_pass` reads them, and only the
samples of the windows asked for are kept, with their rows: 12 bytes a sample.

The samples are the whole-run function's, in its order, not just close:

* every rule of :mod:`~loadtest.analysis.chunks` is per row or per chunk, and a
  batch holds whole rows, so a batch's gaps are the whole run's gaps of those rows;
* a window's gap samples are appended in record order, batch after batch, and
  the ``+inf`` stalls of broken streams after all of them, as
  ``itl_samples_with_rows`` concatenates them (it is a function of the per-request
  chunk counts, known once every batch is read);
* a sample's row is its record's position in the whole run (batch offset + row).

The chunk lists are read as stored: the hold's cut (:mod:`~loadtest.analysis.hold_cut`)
is not applied, as the whole-run function was never given cut lists.
"""

from __future__ import annotations

from typing import Collection, Sequence

import numpy as np

from loadtest.analysis.chunk_lists import ChunkSource
from loadtest.analysis.chunk_pass import SampleColumn, present_windows
from loadtest.analysis.chunks import arrival_wall, broken_stream_samples, chunks_from_lists, gap_samples
from loadtest.analysis.windows import LevelWindow, locate


def itl_with_rows(
    source: ChunkSource,
    windows: Sequence[LevelWindow],
    start_wall: np.ndarray,
    e2e_ms: np.ndarray,
    failed: np.ndarray,
    keep: Collection[int],
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """For each window position in ``keep``: its ITL samples (ms, float64) and the row of each (int32).

    What ``itl_samples_with_rows`` over the whole run gives where its position is
    ``p``, for every ``p`` in ``keep``. ``start_wall``, ``e2e_ms`` and ``failed``
    are per record of the source, in its order (the analyzer's per-request frame).
    Samples of the other windows are dropped as they are found.
    """
    n_windows = len(windows)
    wanted = sorted({int(p) for p in keep})
    columns = {p: (SampleColumn(np.float64), SampleColumn(np.int32)) for p in wanted}
    counts: list[np.ndarray] = []
    first = 0  # the batch's first row, in the source
    for batch in source():
        size = len(batch)
        if size:
            chunks = chunks_from_lists(batch.arrival, batch.lengths, batch.tokens, batch.token_lengths)
            counts.append(chunks.counts)
            wall = arrival_wall(chunks, start_wall[first : first + size])
            values, pos, _times, rows = gap_samples(chunks, locate(wall, windows), wall, rows=True)
            _add(columns, values, pos, rows, first, n_windows)
        first += size
    if first != len(start_wall):
        raise ValueError(f"the chunk lists cover {first} requests, the records {len(start_wall)}")
    count = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    broken = broken_stream_samples(count, failed, start_wall, e2e_ms, windows)
    if broken is not None:
        fail_ms, fail_pos, _fail_at, fail_rows = broken
        _add(columns, fail_ms, fail_pos, fail_rows, 0, n_windows)
    return {p: (values_p.array(), rows_p.array()) for p, (values_p, rows_p) in columns.items()}


def _add(
    columns: dict[int, tuple[SampleColumn, SampleColumn]],
    values: np.ndarray,
    pos: np.ndarray,
    rows: np.ndarray,
    offset: int,
    n_windows: int,
) -> None:
    """Append each kept window's share of ``values`` and their rows (+ ``offset``), in order."""
    present = present_windows(pos, n_windows)
    for p in present:
        if p not in columns:
            continue
        mine = pos == p if len(present) > 1 else slice(None)  # most batches lie in one window
        columns[p][0].append(values[mine])
        columns[p][1].append(rows[mine] + offset if offset else rows[mine])


def dense_owners(rows: np.ndarray, n_rows: int) -> tuple[np.ndarray, int]:
    """Rows renumbered 0..k-1 in row order (int64), and k: ``np.unique(rows, return_inverse=True)``.

    The same numbers as ``np.unique``'s inverse, by a mark and a running count
    over the run's rows instead of a sort of the samples: two linear passes
    and one bool and one int64 per request, not a sorted copy and an argsort
    of every sample of the level.
    """
    seen = np.zeros(n_rows, dtype=bool)
    seen[rows] = True
    rank = np.cumsum(seen, dtype=np.int64) - 1
    return rank[rows], int(rank[-1] + 1) if n_rows else 0
