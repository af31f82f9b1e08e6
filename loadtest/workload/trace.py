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
:class:`~loadtest.errors.InputError` line naming the file and the line.

The replay clock (:class:`Trace`): ``offsets_s`` are the window's arrival
times from the window's start; ``period_s`` is the window's length, so its
mean rate is ``len / period_s``; a level that runs longer than the window at
its speedup replays it again from the start (see
:mod:`loadtest.load.trace_replay`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import orjson

from loadtest.errors import InputError

FORMATS = ("mooncake", "azure", "burstgpt")

#: The longest input or output a trace row may ask for, in tokens: ten million, the longest context
#: window any served model offers (Llama 4 Scout's), and a prompt of that many words is still built
#: in a second or two. A row past it is a typo or a corrupt file, refused with its line: ``1e12``
#: passed before and raised MemoryError when its prompt was built, mid-run.
MAX_TRACE_TOKENS = 10_000_000

#: The CSV columns each format needs: (time, input tokens, output tokens).
CSV_COLUMNS = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
}


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


def _where(path: str, line: int) -> str:
    return f"{path}: line {line}"


# -- rows per format ---------------------------------------------------------------------------


def _count(value: Any, name: str, path: str, line: int) -> int:
    """A token count: a non-negative integer (``12`` or ``"12"``, ``12.0`` too), at most :data:`MAX_TRACE_TOKENS`."""
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or number != number or number < 0:
        raise InputError(f"{_where(path, line)}: '{name}' must be a non-negative integer, got {value!r}")
    if number > MAX_TRACE_TOKENS:  # before int(): a CSV's "inf" is a float that no int holds
        raise InputError(f"{_where(path, line)}: '{name}' is {value!r} tokens; a trace row may ask for at most "
                         f"{MAX_TRACE_TOKENS:,} (more than any model's context: a typo or a corrupt row; see docs/traces.md)")
    if int(number) != number:
        raise InputError(f"{_where(path, line)}: '{name}' must be a non-negative integer, got {value!r}")
    return int(number)


def _mooncake_rows(fh: io.BufferedReader, path: str, digest: Any) -> Iterator[tuple[int, float, int, int, tuple[int, ...]]]:
    for number, raw in enumerate(fh, start=1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw.rstrip(b"\r\n"))
        except orjson.JSONDecodeError as err:
            # the parser's own position is within this one line ("line 2 column 1" read as the file's line 2)
            raise InputError(f"{_where(path, number)}: not valid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(obj, dict):
            raise InputError(f"{_where(path, number)}: expected a JSON object with timestamp, input_length, output_length")
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in obj]
        if missing:
            raise InputError(f"{_where(path, number)}: missing {', '.join(repr(k) for k in missing)} (a mooncake row has timestamp in ms, input_length, output_length, hash_ids)")
        stamp = obj["timestamp"]
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or stamp != stamp:
            raise InputError(f"{_where(path, number)}: 'timestamp' must be a number of milliseconds, got {stamp!r}")
        hashes = obj.get("hash_ids") or []
        if not isinstance(hashes, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in hashes):
            raise InputError(f"{_where(path, number)}: 'hash_ids' must be a list of integers")
        digest.update(raw)
        yield (
            number,
            float(stamp) / 1000.0,
            _count(obj["input_length"], "input_length", path, number),
            _count(obj["output_length"], "output_length", path, number),
            tuple(hashes),
        )


def _seconds(value: str, path: str, line: int, column: str) -> float:
    """A CSV time: seconds as a number, or a date-time (Azure's ``2023-11-16 18:15:46.6805900``).

    A date-time without a zone (Azure's) is read as UTC, not in the host's zone:
    read in local time, a trace spanning a daylight-saving change lost (or
    repeated) an hour on one host and not on another, so the same file replayed
    two schedules. An explicit offset (``+02:00``, ``Z``) is kept as given.
    """
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    head, dot, rest = text.partition(".")
    digits = len(rest) - len(rest.lstrip("0123456789"))
    zone = rest[digits:]  # an offset after the fraction stays: only the digits past microseconds go
    try:
        stamp = datetime.fromisoformat(head + (dot + rest[:min(digits, 6)] + zone if dot else ""))
    except ValueError:
        raise InputError(f"{_where(path, line)}: '{column}' is neither seconds nor a date-time: {value!r}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


def _csv_rows(fh: io.BufferedReader, path: str, fmt: str, digest: Any) -> Iterator[tuple[int, float, int, int, tuple[int, ...]]]:
    text = io.TextIOWrapper(fh, encoding="utf-8-sig", newline="")
    reader = csv.reader(text)
    try:
        header = next(reader, None)
        if header is None:
            return
        names = [h.strip() for h in header]
        want = CSV_COLUMNS[fmt]
        missing = [c for c in want if c not in names]
        if missing:
            raise InputError(
                f"{_where(path, 1)}: the {fmt} header needs {', '.join(want)}; missing {', '.join(missing)} (found {', '.join(names)})"
            )
        t_col, in_col, out_col = (names.index(c) for c in want)
        last = max(t_col, in_col, out_col)
        for row in reader:
            number = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) <= last:
                raise InputError(f"{_where(path, number)}: {len(row)} columns, the header has {len(names)}")
            digest.update(",".join(row).encode() + b"\n")
            yield (
                number,
                _seconds(row[t_col], path, number, want[0]),
                _count(row[in_col].strip(), want[1], path, number),
                _count(row[out_col].strip(), want[2], path, number),
                (),
            )
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text ({err.reason})") from None
    except csv.Error as err:
        raise InputError(f"{_where(path, reader.line_num)}: not valid CSV ({err})") from None
    finally:
        if not fh.closed:
            text.detach()  # the caller closes its own file


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
            source = _mooncake_rows(fh, path, digest) if fmt == "mooncake" else _csv_rows(fh, path, fmt, digest)
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


RawRow = tuple[int, float, int, int, tuple[int, ...]]


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
                f"{_where(path, line)}: timestamp goes backwards (earlier than line {previous[1]}); "
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
