"""One streaming pass over a run's chunk lists: per-request totals, tokens per window, ITL per window.

:mod:`chunks` defines the per-chunk figures over arrays of the whole run. A
soak of 100M chunk timestamps would need ~10 GB that way, so this pass
applies the same functions to one :class:`~loadtest.analysis.chunk_lists.ListBatch`
(a few thousand records) at a time and keeps only what the metrics need:

* per request: its number of token-carrying chunks and its token sum (for
  :func:`frame.request_frame`);
* per window: the output tokens that arrived in it, and its ITL samples with
  the time block of each (for :mod:`intervals`), in record order;

so memory is the ITL samples (12 bytes each) plus one batch, whatever the run.
The samples are copied into large fixed blocks as they come (:class:`SampleColumn`),
not kept as one small array per batch: freed small arrays stay in the
process's heap, so joining them into one array per window would have held
the samples twice.

The figures are identical to a pass over the whole run, not just close:
every rule in :mod:`chunks` is per row or per chunk; ITL samples are kept in
record order (the stalls of broken streams after them, as
:func:`chunks.itl_samples` orders them), and tokens per window are added in
chunk order exactly as one ``np.bincount`` over the run adds them (see
:class:`_TokenSums`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from loadtest.analysis.chunk_lists import ChunkSource
from loadtest.analysis.chunks import arrival_wall, broken_stream_samples, chunks_from_lists, gap_samples
from loadtest.analysis.intervals import block_ids, block_length_s
from loadtest.analysis.windows import LevelWindow, locate

#: Size of the blocks that hold the ITL samples: above glibc's largest mmap threshold (32 MB), so
#: each is its own mapping, returned to the system when freed.
BLOCK_BYTES = 64 << 20


@dataclass(frozen=True)
class ChunkTotals:
    """What the pass found, per request and per window (window order)."""

    counts: np.ndarray  # int64 per request: its token-carrying chunks
    token_sums: np.ndarray  # float64 per request: the tokens of those chunks
    first_tokens: np.ndarray  # float64 per request: the tokens of its first chunk (0 without one)
    tokens_per_window: np.ndarray  # float64 per window: output tokens that arrived in it
    itl: list[tuple[np.ndarray, np.ndarray]]  # per window: ITL samples (ms) and the time block of each


def chunk_pass(
    source: ChunkSource,
    windows: Sequence[LevelWindow],
    start_wall: np.ndarray,
    send_e2e_ms: np.ndarray,
    failed: np.ndarray,
    reported_tokens: np.ndarray,
    *,
    rows: np.ndarray | None = None,
    cut_ms: np.ndarray | None = None,
) -> ChunkTotals:
    """Read every batch of ``source`` once; return the per-request and per-window totals.

    ``rows`` (a bool per record of the source) keeps only some records, e.g.
    one request class; the per-request arrays (``start_wall``: the actual send;
    ``send_e2e_ms``: e2e from the send; ``failed``; ``reported_tokens``: the
    server's final count, NaN where unknown) then cover only those, in order.
    ``cut_ms`` (per record of the source, NaN for none) cuts a record's chunks
    at that many ms after its send (:mod:`hold_cut`).
    """
    n_windows = len(windows)
    origins = [w.window_start for w in windows]
    block_s = [block_length_s(w.duration_s) for w in windows]
    samples = [(SampleColumn(np.float64), SampleColumn(np.int32)) for _ in windows]
    tokens = _TokenSums(n_windows)
    counts: list[np.ndarray] = []
    sums: list[np.ndarray] = []
    firsts: list[np.ndarray] = []
    first = 0  # first row of the batch, in the source
    done = 0  # rows kept so far
    for batch in source():
        size = len(batch)
        if cut_ms is not None:
            batch = batch.cut(cut_ms[first : first + size])
        if rows is not None:
            batch = batch.rows(rows[first : first + size])
        first += size
        here = slice(done, done + len(batch))
        done += len(batch)
        if not len(batch):
            continue
        chunks = chunks_from_lists(batch.arrival, batch.lengths, batch.tokens, batch.token_lengths)
        counts.append(chunks.counts)
        sums.append(chunks.token_sums)
        firsts.append(chunks.first_tokens)
        wall = arrival_wall(chunks, start_wall[here])
        positions = locate(wall, windows)
        tokens.add(chunks, positions, reported_tokens[here])
        values, pos, times, _ = gap_samples(chunks, positions, wall)
        present = present_windows(pos, n_windows)
        for p in present:
            mine = pos == p if len(present) > 1 else slice(None)  # most batches lie in one window
            samples[p][0].append(values[mine])
            samples[p][1].append(_blocks(times[mine], origins[p], block_s[p]))
    expected = len(start_wall)
    if done != expected:
        raise ValueError(f"the chunk lists cover {done} requests, the records {expected}")
    count = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    broken = broken_stream_samples(count, failed, start_wall, send_e2e_ms, windows)
    if broken is not None:
        fail_ms, fail_pos, fail_at, _ = broken
        for p in present_windows(fail_pos, n_windows):
            mine = fail_pos == p
            samples[p][0].append(fail_ms[mine])
            samples[p][1].append(_blocks(fail_at[mine], origins[p], block_s[p]))
    itl = []
    for values_p, blocks_p in samples:  # one window at a time: its blocks are freed as they are joined
        itl.append((values_p.array(), blocks_p.array()))
    return ChunkTotals(
        counts=count,
        token_sums=np.concatenate(sums) if sums else np.zeros(0),
        first_tokens=np.concatenate(firsts) if firsts else np.zeros(0),
        tokens_per_window=tokens.total(),
        itl=itl,
    )


def present_windows(pos: np.ndarray, n_windows: int) -> list[int]:
    """The window positions that occur in ``pos`` (all ≥ 0), ascending."""
    if not len(pos):
        return []
    lo, hi = int(pos.min()), int(pos.max())
    if lo == hi:
        return [lo]
    return np.flatnonzero(np.bincount(pos, minlength=n_windows)).tolist()


def _blocks(times: np.ndarray, origin: float, block_s: float) -> np.ndarray:
    """:func:`intervals.block_ids` of one window's samples, in fewer passes.

    The same arithmetic in place; the samples' times lie inside the window,
    so the ids are finite and small (int32 holds them, as :class:`SampleColumn` keeps them).
    """
    ids = np.subtract(times, origin)
    ids /= block_s
    np.floor(ids, out=ids)
    if not np.isfinite(ids).all():  # never inside a window; block_ids knows what a NaN time gets
        return block_ids(times, origin, block_s)
    return ids.astype(np.int32)


class SampleColumn:
    """A growing array, in blocks allocated whole (so freed whole), doubling up to :data:`BLOCK_BYTES`.

    Public because ``loadtest compare`` collects its own per-window samples the same way
    (:mod:`loadtest.compare.itl_rows`), for the same reason.
    """

    def __init__(self, dtype: type) -> None:
        self.dtype = np.dtype(dtype)
        self.largest = max(1, BLOCK_BYTES // self.dtype.itemsize)
        self.blocks: list[np.ndarray] = []
        self.fill = 0  # items used in the last block
        self.total = 0

    def append(self, values: np.ndarray) -> None:
        done = 0
        while done < len(values):
            if not self.blocks or self.fill == len(self.blocks[-1]):
                self.blocks.append(np.empty(min(self.largest, max(4096, self.total, len(values) - done)), self.dtype))
                self.fill = 0
            block = self.blocks[-1]
            take = min(len(values) - done, len(block) - self.fill)
            block[self.fill : self.fill + take] = values[done : done + take]
            self.fill += take
            self.total += take
            done += take

    def array(self) -> np.ndarray:
        """Everything appended, as one array; the blocks are released."""
        if not self.blocks:
            return np.empty(0, self.dtype)
        last = self.blocks[-1][: self.fill]
        out = np.concatenate(self.blocks[:-1] + [last]) if len(self.blocks) > 1 else last.copy()
        self.blocks, self.fill, self.total = [], 0, 0
        return out


class _TokenSums:
    """Output tokens per window, summed batch after batch exactly as :func:`chunks.tokens_per_window` sums the run.

    That function adds each chunk's tokens (scaled to the server's count when
    it differs, so maybe fractional) in chunk order with one ``np.bincount``.
    Here each batch is added to the running totals with ``np.add.at``, which
    adds in the same order, so every rounding step is the same. Whole numbers
    (the usual case: no scaling) are exact in any order, so a batch of them
    goes through ``np.bincount`` instead (the faster path, same result).
    """

    def __init__(self, n_windows: int) -> None:
        self._sums = np.zeros(n_windows)

    def add(self, chunks, positions: np.ndarray, reported: np.ndarray) -> None:  # noqa: ANN001 (a chunks.Chunks)
        n = len(self._sums)
        if n == 0:
            return
        inside = positions >= 0
        where = positions[inside]
        sums = chunks.token_sums
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where((sums > 0) & (reported > 0), reported / sums, 1.0)
        exact = bool(np.all(scale == 1.0)) and bool(np.all(self._sums < 2.0**52)) and bool(
            np.all(self._sums == np.floor(self._sums))
        )
        if exact:
            weights = chunks.tokens[inside] if chunks.multi_token else None
            self._sums += np.bincount(where, weights=weights, minlength=n)[:n]
        else:
            np.add.at(self._sums, where, (chunks.tokens * scale[chunks.row])[inside])

    def total(self) -> np.ndarray:
        return self._sums.astype(float)
