"""Per-level samples for the bootstrap, grouped by the request they came from.

The comparison resamples *requests*, not chunks: the inter-token gaps of one
stream share its batch and its queue, so they are not independent draws, and
resampling them one by one would make the interval too narrow (and the gate
too quick to fire). Every sample therefore carries its owner, a dense request
id within its level.

The populations are the analyzer's own (see :mod:`loadtest.analysis.frame`
and :mod:`loadtest.analysis.chunks`): TTFT/TTFB of measured requests, e2e and
TPOT of complete ones, failures as +inf, ITL per token assigned to the window
its chunk arrived in; for throughput, the time and tokens of the requests
that ended in the window. They are rebuilt with the analysis functions, never re-derived.

The ITL samples are read from the chunk lists a batch at a time
(:mod:`loadtest.compare.itl_rows`), and only for the window kept at each
concurrency, so a run's chunk lists are never in memory whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from loadtest.analysis.chunk_lists import ChunkSource, frame_source
from loadtest.analysis.windows import level_windows
from loadtest.compare.itl_rows import dense_owners, itl_with_rows
from loadtest.compare.level_keys import LevelKey, window_key
from loadtest.metric_registry import METRICS

#: Frame column holding each latency metric's per-request sample.
#: Per-request latency metrics and their requests.parquet sample column (the registry's).
SAMPLE_COLUMNS = {m.name: m.sample_column for m in METRICS if m.sample_column}


@dataclass
class Clustered:
    """Sample values and the request (0..n_owners-1) each belongs to."""

    values: np.ndarray
    owner: np.ndarray
    n_owners: int


@dataclass
class LevelSamples:
    """What the bootstrap needs at one level of one run."""

    #: The level's key (:mod:`level_keys`): its users, or at a rate its nominal rate or speedup.
    concurrency: LevelKey
    window_s: float
    latency: dict[str, Clustered] = field(default_factory=dict)
    failed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # per measured request
    #: Requests that ended in the window (cancelled ones excepted): their time and output tokens,
    #: for the throughput's interval (see :func:`loadtest.compare.delta.throughput_replicates`).
    served_e2e_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    served_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: Per measured successful request whose output was checked (tools, response_format): was it valid.
    valid: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


def level_samples(
    requests: pd.DataFrame, run: dict, frame: pd.DataFrame, chunks: ChunkSource | None = None
) -> dict[LevelKey, LevelSamples]:
    """Samples per level (by its key: users, or a rate's nominal rate or speedup), from the records and
    the analyzer's per-request ``frame``.

    ``chunks`` yields the records' chunk lists batch by batch (a run on disk:
    ``requests`` then holds only the scalar columns); by default they are
    ``requests``' own list columns. When a level ran twice (a refine probe
    repeating a level), the window with more measured requests is kept (the
    first of equals), and the other's ITL samples are never collected.
    """
    windows, _ = level_windows(run, requests)
    start = frame["start_wall"].to_numpy(dtype=float)
    pos = frame["pos"].to_numpy()
    end_pos = frame["end_pos"].to_numpy()
    measured = frame["measured"].to_numpy()
    failed = frame["failed"].to_numpy()
    cancelled = frame["cancelled"].to_numpy()
    e2e = frame["e2e_ms"].to_numpy(dtype=float)
    tokens = frame["completion_tokens"].to_numpy(dtype=float)
    ok = frame["ok"].to_numpy()
    validity = frame["output_valid"].to_numpy(dtype=float) if "output_valid" in frame else np.full(len(frame), np.nan)

    mine = [measured & (pos == p) & ~cancelled for p in range(len(windows))]
    trace = run.get("trace")
    kept = _kept_windows([window_key(w.concurrency, w.rate_rps, trace) for w in windows], [int(m.sum()) for m in mine])
    source = chunks if chunks is not None else frame_source(requests)
    itl = itl_with_rows(source, windows, start, e2e, failed, kept.values())

    out: dict[LevelKey, LevelSamples] = {}
    for concurrency, p in kept.items():
        window = windows[p]
        ended = (end_pos == p) & ~cancelled & np.isfinite(e2e)
        level = LevelSamples(
            concurrency=concurrency,
            window_s=window.duration_s,
            failed=failed[mine[p]],
            served_e2e_ms=e2e[ended],
            served_tokens=np.nan_to_num(tokens[ended]),
            valid=validity[mine[p] & ok & ~np.isnan(validity)] == 1.0,  # the population of valid_output_rate
        )
        for metric, column in SAMPLE_COLUMNS.items():
            values = frame[column].to_numpy(dtype=float)[pos == p]
            values = values[~np.isnan(values)]
            level.latency[metric] = Clustered(values, np.arange(len(values)), len(values))
        values, rows = itl.pop(p)
        owner, n_owners = dense_owners(rows, len(frame))
        level.latency["itl_ms"] = Clustered(values, owner, n_owners)
        out[concurrency] = level
    return out


def _kept_windows(concurrencies: list[LevelKey], measured: list[int]) -> dict[LevelKey, int]:
    """The window position kept per level key (in order of first appearance): its first with the most requests."""
    kept: dict[LevelKey, int] = {}
    for p, concurrency in enumerate(concurrencies):
        previous = kept.get(concurrency)
        if previous is None or measured[previous] < measured[p]:
            kept[concurrency] = p
    return kept
