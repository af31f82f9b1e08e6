"""Per-chunk samples: inter-token latency and streamed tokens, fully vectorized.

A run of 100k requests × 100 chunks holds 10M chunk timestamps. Everything here
works on the flattened list columns (one numpy array over all chunks, plus the
owning row of each chunk), so the cost is a handful of array passes rather than
a Python loop per request.

Definitions (also stated in summary.json):

* **ITL is per token.** The gap between two consecutive content chunks is the
  time the *later* chunk's tokens took. A chunk carrying k > 1 tokens (servers
  that batch detokenized text, speculative decoding) spreads its gap evenly:
  the value ``gap / k`` is recorded k times. Otherwise one 3-token chunk after
  60 ms would count as a single 60 ms ITL sample where the user actually saw
  20 ms per token, and ITL would not be comparable across servers.
* The first chunk has no predecessor: its tokens are covered by TTFT, not ITL.
* A chunk that carries 0 tokens is not a token arrival and is skipped.
* A failed request that streamed at least one chunk contributes one ``+inf``
  ITL sample at the moment it failed: the next token never came, and a stall
  that ends in a timeout must not vanish from the ITL percentiles.
* Each sample belongs to the level whose measured window contains the arrival
  of its chunk (``start_wall + chunk_ms / 1000``), see :mod:`windows`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.columns import flatten_list
from loadtest.analysis.windows import LevelWindow, locate


@dataclass(frozen=True)
class Chunks:
    """All token-carrying content chunks of a run, flattened in request order."""

    arrival_ms: np.ndarray  # float64, ms since the owning request's start
    tokens: np.ndarray  # int32 ≥ 1, tokens in each chunk
    row: np.ndarray  # int32, row position of the owning request in the frame
    counts: np.ndarray  # int64 per request: its number of token-carrying chunks
    token_sums: np.ndarray  # float64 per request: sum of its chunk tokens
    multi_token: bool  # some chunk carries more than one token
    first_tokens: np.ndarray  # float64 per request: the tokens of its first chunk (0 without one)


def flatten_chunks(requests: pd.DataFrame) -> Chunks:
    """Flatten ``chunk_ms`` / ``chunk_tokens`` into aligned per-chunk arrays.

    Rows whose token list is missing or does not match the chunk list in length
    count one token per chunk (the same fallback the client uses when the
    server reports no usage). Null token entries also count as one token.
    """
    arrival, lengths = flatten_list(requests, "chunk_ms", np.float64)
    tok_values, tok_lengths = flatten_list(requests, "chunk_tokens", None)
    return chunks_from_lists(arrival, lengths, tok_values, tok_lengths)


def chunks_from_lists(
    arrival: np.ndarray, lengths: np.ndarray, tok_values: np.ndarray, tok_lengths: np.ndarray
) -> Chunks:
    """:func:`flatten_chunks` from lists already flattened (values, and the length of each row's list).

    Every rule here is per row (a row's tokens either match its chunks or
    count one each), so flattening a run batch by batch gives, row for row,
    what flattening it whole gives (:mod:`chunk_pass` relies on that).
    """
    n = len(lengths)
    if len(tok_values) == len(arrival) and np.array_equal(tok_lengths, lengths):
        tokens = tok_values
    else:
        tokens = np.ones(len(arrival), dtype=np.float64)
        if len(tok_values):
            match = tok_lengths == lengths
            tokens[np.repeat(match, lengths)] = tok_values[np.repeat(match, tok_lengths)]
    if tokens.dtype.kind == "f":
        # null → one token; fractional counts are rounded
        tokens = np.where(np.isnan(tokens), 1.0, np.rint(tokens))
    row = _row_ids(lengths)

    keep = tokens > 0
    if arrival.dtype.kind == "f":
        keep &= ~np.isnan(arrival)
    if not keep.all():
        arrival, tokens, row = arrival[keep], tokens[keep], row[keep]
    tokens_i = tokens.astype(np.int32, copy=False)
    counts = np.bincount(row, minlength=n).astype(np.int64)
    multi = bool((tokens_i != 1).any())
    sums = np.bincount(row, weights=tokens_i, minlength=n) if multi else counts.astype(float)
    return Chunks(arrival, tokens_i, row, counts, sums, multi, _first_tokens(tokens_i, counts, multi))


def _first_tokens(tokens: np.ndarray, counts: np.ndarray, multi: bool) -> np.ndarray:
    """Each request's first chunk's tokens: what arrived at TTFT, so not part of its decode time (TPOT)."""
    has = counts > 0
    if not multi:
        return has.astype(float)
    first = np.zeros(len(counts))
    first[has] = tokens[(np.cumsum(counts) - counts)[has]]
    return first


def _row_ids(lengths: np.ndarray) -> np.ndarray:
    """Row id (int32) of every flattened item."""
    return np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)


def chunk_positions(chunks: Chunks, start_wall: np.ndarray, windows: Sequence[LevelWindow]) -> np.ndarray:
    """Window position of each chunk's absolute arrival (-1 outside every window)."""
    return locate(arrival_wall(chunks, start_wall), windows)


def itl_samples(
    chunks: Chunks,
    positions: np.ndarray,
    start_wall: np.ndarray,
    e2e_ms: np.ndarray,
    failed: np.ndarray,
    windows: Sequence[LevelWindow],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-token ITL samples (ms), the window position of each, and its wall time.

    ``positions`` comes from :func:`chunk_positions`. Returns only samples that
    fall inside a measured window. The wall time (the arrival of the chunk the
    sample came from) lets intervals resample blocks of time (:mod:`intervals`).
    """
    per_token, pos, times, _rows = itl_samples_with_rows(chunks, positions, start_wall, e2e_ms, failed, windows)
    return per_token, pos, times


def itl_samples_with_rows(
    chunks: Chunks,
    positions: np.ndarray,
    start_wall: np.ndarray,
    e2e_ms: np.ndarray,
    failed: np.ndarray,
    windows: Sequence[LevelWindow],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`itl_samples` plus the row (request) each sample belongs to.

    ``loadtest compare`` bootstraps ITL by resampling *requests*: the gaps of
    one stream are correlated (they share a batch and a queue), so resampling
    single gaps would make the interval too narrow.
    """
    per_token, pos, times, owner = gap_samples(chunks, positions, arrival_wall(chunks, start_wall), rows=True)
    broken = broken_stream_samples(chunks.counts, failed, start_wall, e2e_ms, windows)
    if broken is not None:
        fail_ms, fail_pos, fail_at, fail_rows = broken
        per_token = np.concatenate([per_token, fail_ms])
        pos = np.concatenate([pos, fail_pos])
        times = np.concatenate([times, fail_at])
        owner = np.concatenate([owner, fail_rows.astype(owner.dtype)])
    return per_token, pos, times, owner


def arrival_wall(chunks: Chunks, start_wall: np.ndarray) -> np.ndarray:
    """Wall-clock arrival of each chunk (s): its request's send plus its ``chunk_ms``."""
    return start_wall[chunks.row] + chunks.arrival_ms / 1000.0


def gap_samples(
    chunks: Chunks, positions: np.ndarray, arrival_wall_s: np.ndarray, *, rows: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Per-token ITL samples from the gaps between chunks: (ms, window position, wall time, row or None).

    Only gaps whose later chunk arrived in a measured window. The stalls of
    broken streams are :func:`broken_stream_samples`; ``rows=True`` also
    returns the row each sample belongs to.
    """
    row = chunks.row
    # chunk j+1 has a predecessor in the same request, and arrived in a window
    valid = (row[1:] == row[:-1]) & (positions[1:] >= 0)
    gaps = np.diff(chunks.arrival_ms)[valid]
    pos = positions[1:][valid]
    times = arrival_wall_s[1:][valid]
    owner = row[1:][valid] if rows else None
    if chunks.multi_token:
        k = chunks.tokens[1:][valid]
        per_token = np.repeat(gaps / k, k)
        pos = np.repeat(pos, k)
        times = np.repeat(times, k)
        owner = np.repeat(owner, k) if rows else None
    else:
        per_token = gaps
    return per_token, pos, times, owner


def broken_stream_samples(
    counts: np.ndarray, failed: np.ndarray, start_wall: np.ndarray, e2e_ms: np.ndarray, windows: Sequence[LevelWindow]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """A stream that broke after some content: the next token never arrived.

    One ``+inf`` sample per such request at the moment it failed, if that is
    inside a measured window: (samples, window position, wall time, row);
    None when no stream broke.
    """
    broken = failed & (counts > 0)
    if not broken.any():
        return None
    fail_at = start_wall[broken] + np.nan_to_num(e2e_ms[broken]) / 1000.0
    fail_pos = locate(fail_at, windows)
    inside = fail_pos >= 0
    return np.full(int(inside.sum()), np.inf), fail_pos[inside], fail_at[inside], np.flatnonzero(broken)[inside]


def tokens_per_window(
    chunks: Chunks, positions: np.ndarray, completion_tokens: np.ndarray, n_windows: int
) -> np.ndarray:
    """Output tokens delivered inside each measured window (for tokens/s).

    Counted at chunk arrival, so a request spanning two levels credits each
    level with the tokens it actually streamed there. When the server reported
    a completion-token count that differs from the chunk-token sum (``usage``
    counts vs. one-per-chunk estimates), each chunk is scaled so the request's
    total matches the reported count. Pass NaN (or 0) where no final count is
    known (failed or cancelled requests): their chunks count as streamed.
    """
    if n_windows == 0:
        return np.zeros(0)
    sums = chunks.token_sums
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where((sums > 0) & (completion_tokens > 0), completion_tokens / sums, 1.0)
    inside = positions >= 0
    if np.all(scale == 1.0):
        weights = None if not chunks.multi_token else chunks.tokens[inside]
    else:
        weights = (chunks.tokens * scale[chunks.row])[inside]
    return np.bincount(positions[inside], weights=weights, minlength=n_windows)[:n_windows].astype(float)


def group_by_position(values: np.ndarray, positions: np.ndarray, n_windows: int) -> list[np.ndarray]:
    """Split ``values`` into one array per window position (in no particular order).

    One stable argsort of the small-integer positions (numpy uses a radix sort
    for 16-bit keys) and one gather: two linear passes, whatever the number
    of levels.
    """
    if n_windows == 0:
        return []
    key = positions.astype(np.int16) if n_windows < 2**15 else positions
    order = np.argsort(key, kind="stable")
    counts = np.bincount(positions, minlength=n_windows)[:n_windows]
    return np.split(values[order], np.cumsum(counts)[:-1])
