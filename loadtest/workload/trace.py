"""Production traces: Mooncake (JSONL), Azure LLM inference (CSV) and BurstGPT (CSV), read as a stream.

A trace row is an arrival time and the lengths of one request (and, in
Mooncake's, the block hashes that say which requests share a prefix). Formats
(``workload.trace.format``):

* ``mooncake``: one JSON object per line, ``{"timestamp": ms, "input_length": n,
  "output_length": n, "hash_ids": [int, ...]}`` (``hash_ids`` optional);
  the timestamp is in **milliseconds**;
* ``azure``: CSV with the header ``TIMESTAMP,ContextTokens,GeneratedTokens``;
  ``TIMESTAMP`` is a date-time (``2023-11-16 18:15:46.6805900``, fractions past
  microseconds are cut) or a number of seconds;
* ``burstgpt``: CSV with the header ``Timestamp,Model,Request tokens,Response
  tokens,Total tokens,Log Type`` (only ``Timestamp``, seconds, and the two
  token columns are read).

Times are taken relative to the file's first row (with ``sort: true``, its
earliest row, wherever it stands); ``window: {start_s, duration_s}`` keeps the rows with ``start_s <= t < start_s + duration_s``, and
``max_requests`` the first that many of them. The window's length (its
``period_s``) is ``duration_s``; when there is none, when ``max_requests`` cut
it, or when the file ends inside it, it is the span of its rows plus one mean
gap, so that a repeat keeps the mean rate. A row with a zero input or output
length (BurstGPT's failed requests have ``Response tokens`` 0) cannot be sent
as it was and is skipped, and counted (``skipped``).

The file is read once, one line at a time, and reading stops at the end of the
window: a trace of millions of rows costs only its window in memory. The
timestamps must not go backwards: a row earlier than the one before it is an
error naming its line, unless ``sort: true`` asks to sort the window (that is
documented, never silent). Sorting reads the whole file, since its earliest
row may be its last; it keeps only the rows that can still fall inside the
window. Every problem is one
:class:`~loadtest.errors.InputError` line naming the file and the line. Each
format's rows are read in :mod:`loadtest.workload.trace_rows`.

The replay clock (:class:`Trace`): ``offsets_s`` are the window's arrival
times from the window's start; ``period_s`` is the window's length, so its
mean rate is ``len / period_s``; a level that runs longer than the window at
its speedup replays it again from the start (see
:mod:`loadtest.load.trace_replay`).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from loadtest.errors import InputError
from loadtest.workload.trace_rows import CSV_COLUMNS, MAX_TRACE_TOKENS, RawRow, csv_rows, mooncake_rows, where

FORMATS = ("mooncake", "azure", "burstgpt")

__all__ = ["CSV_COLUMNS", "FORMATS", "MAX_TRACE_TOKENS", "Trace", "TraceArrival", "TraceRow", "load_trace", "read_trace"]


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace: when it arrived (s, from the file's first row, or its earliest when sorted) and its lengths."""

    t_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    #: The file line it came from (for error lines further on).
    line: int = 0


@dataclass(frozen=True, slots=True)
class TraceArrival:
    """One arrival of a replay: which row it sends, in which level and which repetition of the window."""

    row: int
    level: int
    rep: int = 0


@dataclass
class Trace:
    """A trace window, ready to replay."""

    path: str
    format: str
    rows: list[TraceRow]
    #: Arrival times from the window's start (s), ascending, same order as ``rows``.
    offsets_s: list[float]
    #: The window's length (s): its mean rate is ``len(rows) / period_s``.
    period_s: float
    sha256: str
    skipped: int = 0
    sorted_rows: bool = False
    block_tokens: int = 512
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def mean_rate_rps(self) -> float:
        """The window's mean arrival rate: the rate at speedup 1."""
        return len(self.rows) / self.period_s

    def fingerprint(self) -> dict[str, Any]:
        """What run.json records (``trace``): which rows were replayed, and their rate."""
        return {
            "path": self.path,
            "format": self.format,
            "sha256": self.sha256,
            "rows": len(self.rows),
            "skipped": self.skipped,
            "sorted": self.sorted_rows,
            "period_s": self.period_s,
            "mean_rate_rps": self.mean_rate_rps,
            "block_tokens": self.block_tokens,
            **self.meta,
        }


# -- the window --------------------------------------------------------------------------------


def read_trace(
    path: str,
    fmt: str,
    *,
    start_s: float = 0.0,
    duration_s: float | None = None,
    max_requests: int | None = None,
    sort: bool = False,
    block_tokens: int = 512,
) -> Trace:
    """Read a trace file's window (see the module docstring); raises a one-line InputError."""
    if fmt not in FORMATS:
        raise InputError(f"{path}: unknown trace format {fmt!r} (use one of {', '.join(FORMATS)})")
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such trace file")
    end_s = None if duration_s is None else start_s + duration_s
    digest = hashlib.sha256()
    try:
        with open(p, "rb") as fh:
            source = mooncake_rows(fh, path, digest) if fmt == "mooncake" else csv_rows(fh, path, fmt, digest)
            if sort:
                scan = _sorted_window(source, start_s, end_s)
            else:
                scan = _window_in_order(source, path, start_s, end_s, max_requests)
            source.close()
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    if scan.seen == 0:
        raise InputError(f"{path}: the trace is empty (no {fmt} rows)")
    rows = scan.rows if max_requests is None else scan.rows[:max_requests]
    if len(rows) < 2:
        span = f"window start_s {start_s:g}" + (f", duration_s {duration_s:g}" if duration_s is not None else "")
        raise InputError(f"{path}: {len(rows)} usable request(s) in the {span} ({scan.skipped} skipped for a zero length); a replay needs at least 2")
    whole = duration_s if scan.past_end else None  # a window running past the file's end is as long as its rows
    return _window(path, fmt, rows, start_s, whole, max_requests, digest.hexdigest(), scan.skipped, scan.unsorted,
                   block_tokens, asked=duration_s)


@dataclass
class _Scan:
    """What one pass over the file found: the window's usable rows, in time order, and its counts."""

    rows: list[TraceRow] = field(default_factory=list)
    #: Rows of the window with a zero length (not sendable as they were).
    skipped: int = 0
    #: Rows in the file, whether in the window or not (0: the file is empty).
    seen: int = 0
    #: A timestamp went backwards somewhere in the file (only with ``sort``; otherwise that is an error).
    unsorted: bool = False
    #: A row at or after the window's end was seen: the window is whole, its length is ``duration_s``.
    past_end: bool = False


def _window_in_order(source: Iterator[RawRow], path: str, start_s: float, end_s: float | None,
                     max_requests: int | None) -> _Scan:
    """The window of a file in time order: times from its first row, reading stops at the window's end."""
    scan = _Scan()
    t0: float | None = None
    previous: tuple[float, int] | None = None
    for line, t_abs, n_in, n_out, hashes in source:
        scan.seen += 1
        if t0 is None:
            t0 = t_abs
        if previous is not None and t_abs < previous[0]:
            raise InputError(
                f"{where(path, line)}: timestamp goes backwards (earlier than line {previous[1]}); "
                "sort the file, or set workload.trace.sort: true to sort the window"
            )
        previous = (t_abs, line)
        t = t_abs - t0
        if t < start_s:
            continue
        if end_s is not None and t >= end_s:
            scan.past_end = True
            break
        if n_in < 1 or n_out < 1:
            scan.skipped += 1
            continue
        scan.rows.append(TraceRow(t, n_in, n_out, hashes, line))
        if max_requests is not None and len(scan.rows) >= max_requests:
            break
    return scan


def _sorted_window(source: Iterator[RawRow], start_s: float, end_s: float | None) -> _Scan:
    """The window of the file's rows sorted by time (``sort: true``): times from its **earliest** row.

    The earliest row may come anywhere in the file, so the whole file is read
    before any offset is known. Taking times from the first row instead gave
    the rows before it negative offsets, and the window dropped them without a
    word. Only the rows that can still fall inside the window are kept: a row
    already ``end_s`` or more after the earliest seen so far is past the end
    whatever comes later (the earliest only moves back).
    """
    scan = _Scan()
    kept: list[RawRow] = []
    lowest = highest = None
    for raw in source:
        t_abs = raw[1]
        scan.seen += 1
        if highest is not None and t_abs < highest:
            scan.unsorted = True
        lowest = t_abs if lowest is None else min(lowest, t_abs)
        highest = t_abs if highest is None else max(highest, t_abs)
        if end_s is None or t_abs - lowest < end_s:
            kept.append(raw)
    if lowest is None:
        return scan
    kept.sort(key=lambda raw: raw[1])  # stable: rows at one time keep the file's order
    for line, t_abs, n_in, n_out, hashes in kept:
        t = t_abs - lowest
        if t < start_s or (end_s is not None and t >= end_s):
            continue
        if n_in < 1 or n_out < 1:
            scan.skipped += 1
            continue
        scan.rows.append(TraceRow(t, n_in, n_out, hashes, line))
    scan.past_end = end_s is not None and highest - lowest >= end_s
    return scan


def _window(path, fmt, rows, start_s, duration_s, max_requests, sha, skipped, unsorted, block_tokens, asked=None) -> Trace:
    """Offsets from the window's start and its length (the span of the rows when it was cut short)."""
    offsets = [r.t_s - start_s for r in rows]
    cut = max_requests is not None and len(rows) >= max_requests
    if duration_s is not None and not cut:
        period = float(duration_s)
    else:
        first = offsets[0]
        span = offsets[-1] - first
        if span <= 0:  # no gap to take a rate from: it was an invented 1 s per row (1 req/s at 1×)
            raise InputError(
                f"{path}: the window's {len(rows)} usable requests are all at one time (lines {rows[0].line} to "
                f"{rows[-1].line}); a trace window needs rows at two or more distinct times to have a rate"
            )
        # n arrivals span n-1 gaps: the period holds n of them, so a repeat keeps the mean gap
        period = span * len(rows) / (len(rows) - 1)
        offsets = [o - first for o in offsets]
    return Trace(
        path=path,
        format=fmt,
        rows=rows,
        offsets_s=offsets,
        period_s=period,
        sha256=sha,
        skipped=skipped,
        sorted_rows=unsorted,
        block_tokens=block_tokens,
        meta={"window": {"start_s": start_s, "duration_s": asked}, "max_requests": max_requests},
    )


_LOADED: dict[tuple, Trace] = {}
_LOCK = threading.RLock()


def load_trace(spec: Any) -> Trace:
    """The scenario's trace window (``workload.trace``), read once per process."""
    key = (spec.path, spec.format, spec.window.start_s, spec.window.duration_s, spec.max_requests, spec.sort, spec.block_tokens)
    with _LOCK:
        if key not in _LOADED:
            try:
                _LOADED[key] = _read_spec(spec)
            except InputError as err:
                raise InputError(f"workload.trace: {err}") from None
        return _LOADED[key]


def _read_spec(spec: Any) -> Trace:
    return read_trace(
                spec.path,
                spec.format,
                start_s=spec.window.start_s,
                duration_s=spec.window.duration_s,
                max_requests=spec.max_requests,
                sort=spec.sort,
                block_tokens=spec.block_tokens,
            )
