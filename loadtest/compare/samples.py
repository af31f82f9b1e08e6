"""Per-level samples for the bootstrap, grouped by the request they came from.

The comparison resamples *requests*, not chunks: the inter-token gaps of one
stream share its batch and its queue, so they are not independent draws, and
resampling them one by one would make the interval too narrow (and the gate
too quick to fire). Every sample therefore carries its owner, a dense request
id within its level.

The populations are the analyzer's own (see :mod:`loadtest.analysis.frame`
and :mod:`loadtest.analysis.chunks`): TTFT/TTFB of measured requests, e2e and
TPOT of complete ones, failures as +inf, ITL per token assigned to the window
its chunk arrived in, throughput from the successful requests that ended in
the window. They are rebuilt with the analysis functions, never re-derived.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from loadtest.analysis.chunks import chunk_positions, flatten_chunks, itl_samples_with_rows
from loadtest.analysis.windows import level_windows

#: Frame column holding each latency metric's per-request sample.
SAMPLE_COLUMNS = {"ttft_ms": "ttft_sample", "ttfb_ms": "ttfb_sample", "e2e_ms": "e2e_sample", "tpot_ms": "tpot_sample"}


@dataclass
class Clustered:
    """Sample values and the request (0..n_owners-1) each belongs to."""

    values: np.ndarray
    owner: np.ndarray
    n_owners: int


@dataclass
class LevelSamples:
    """What the bootstrap needs at one concurrency level of one run."""

    concurrency: int
    window_s: float
    latency: dict[str, Clustered] = field(default_factory=dict)
    failed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # per measured request
    served_e2e_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))  # requests that ended in the window
    completed: int = 0  # successful requests that ended in the window
    served_rps: float = float("nan")  # successful requests per second, partial ones by their share (see below)


def level_samples(requests: pd.DataFrame, run: dict, frame: pd.DataFrame) -> dict[int, LevelSamples]:
    """Samples per concurrency, from the raw records and the analyzer's per-request ``frame``.

    When a concurrency ran twice (a refine probe repeating a level), the
    window with more requests is kept.
    """
    windows, _ = level_windows(run, requests)
    chunks = flatten_chunks(requests)
    start = frame["start_wall"].to_numpy(dtype=float)
    positions = chunk_positions(chunks, start, windows)
    itl, itl_pos, itl_row = itl_samples_with_rows(
        chunks, positions, start, frame["e2e_ms"].to_numpy(dtype=float), frame["failed"].to_numpy(), windows
    )
    pos = frame["pos"].to_numpy()
    end_pos = frame["end_pos"].to_numpy()
    measured = frame["measured"].to_numpy()
    ok = frame["ok"].to_numpy()
    failed = frame["failed"].to_numpy()
    cancelled = frame["cancelled"].to_numpy()
    e2e = frame["e2e_ms"].to_numpy(dtype=float)

    out: dict[int, LevelSamples] = {}
    for p, window in enumerate(windows):
        mine = measured & (pos == p) & ~cancelled
        ended = (end_pos == p) & ~cancelled & np.isfinite(e2e)
        level = LevelSamples(
            concurrency=window.concurrency,
            window_s=window.duration_s,
            failed=failed[mine],
            served_e2e_ms=e2e[ended],
            completed=int((ended & ok).sum()),
            served_rps=served_rate(start, frame["end_wall"].to_numpy(dtype=float), ok,
                                   window.window_start, window.end_wall),
        )
        for metric, column in SAMPLE_COLUMNS.items():
            values = frame[column].to_numpy(dtype=float)[pos == p]
            values = values[~np.isnan(values)]
            level.latency[metric] = Clustered(values, np.arange(len(values)), len(values))
        here = itl_pos == p
        level.latency["itl_ms"] = _dense(itl[here], itl_row[here])
        previous = out.get(window.concurrency)
        if previous is None or len(previous.failed) < len(level.failed):
            out[window.concurrency] = level
    return out


def _dense(values: np.ndarray, rows: np.ndarray) -> Clustered:
    """Renumber owners 0..k-1 (only requests that have a sample here)."""
    if len(rows) == 0:
        return Clustered(values, rows.astype(np.int64), 0)
    unique, owner = np.unique(rows, return_inverse=True)
    return Clustered(values, owner.astype(np.int64), len(unique))


def served_rate(start: np.ndarray, end: np.ndarray, ok: np.ndarray, w_start: float, w_end: float) -> float:
    """Successful requests per second of window, each counted by the share of its time inside it.

    The summary's ``requests_per_s`` counts whole requests that *ended* in the
    window, so in a short level one request more or less crossing the edge
    moves it by a whole request (7 vs 6 in 2.5 s is 14%), which is noise a
    gate must not read as a change. Counting each successful request by the
    fraction of its life spent inside the window removes that edge effect
    and estimates the same rate.
    """
    seconds = w_end - w_start
    if not seconds > 0:
        return float("nan")
    with np.errstate(invalid="ignore", divide="ignore"):
        life = end - start
        overlap = np.clip(np.minimum(end, w_end) - np.maximum(start, w_start), 0.0, None)
        share = np.where(life > 0, overlap / life, ((start >= w_start) & (start < w_end)).astype(float))
    share = np.where(ok & np.isfinite(share), share, 0.0)
    return float(share.sum() / seconds)
