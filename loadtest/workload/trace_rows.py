"""The rows of a trace file, one format at a time: each row's file line, time and lengths, or one line naming what is wrong.

The layouts are in :mod:`loadtest.workload.trace` (which reads the window from
these rows). Every reader yields ``(line, seconds, input tokens, output tokens,
hash_ids)`` in file order and feeds each row's bytes to ``digest``, so the
window's sha256 is of the rows read; every problem is one
:class:`~loadtest.errors.InputError` naming the file and the line.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timezone
from typing import Any, Iterator

import orjson

from loadtest.errors import InputError

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


#: One row as read: its file line, its time (s, as the file gives it), its input and output tokens, its hash_ids.
RawRow = tuple[int, float, int, int, tuple[int, ...]]


def where(path: str, line: int) -> str:
    return f"{path}: line {line}"


# -- rows per format ---------------------------------------------------------------------------


def _count(value: Any, name: str, path: str, line: int) -> int:
    """A token count: a non-negative integer (``12`` or ``"12"``, ``12.0`` too), at most :data:`MAX_TRACE_TOKENS`."""
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or number != number or number < 0:
        raise InputError(f"{where(path, line)}: '{name}' must be a non-negative integer, got {value!r}")
    if number > MAX_TRACE_TOKENS:  # before int(): a CSV's "inf" is a float that no int holds
        raise InputError(f"{where(path, line)}: '{name}' is {value!r} tokens; a trace row may ask for at most "
                         f"{MAX_TRACE_TOKENS:,} (more than any model's context: a typo or a corrupt row; see docs/traces.md)")
    if int(number) != number:
        raise InputError(f"{where(path, line)}: '{name}' must be a non-negative integer, got {value!r}")
    return int(number)


def mooncake_rows(fh: io.BufferedReader, path: str, digest: Any) -> Iterator[RawRow]:
    for number, raw in enumerate(fh, start=1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw.rstrip(b"\r\n"))
        except orjson.JSONDecodeError as err:
            # the parser's own position is within this one line ("line 2 column 1" read as the file's line 2)
            raise InputError(f"{where(path, number)}: not valid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where(path, number)}: expected a JSON object with timestamp, input_length, output_length")
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in obj]
        if missing:
            raise InputError(f"{where(path, number)}: missing {', '.join(repr(k) for k in missing)} (a mooncake row has timestamp in ms, input_length, output_length, hash_ids)")
        stamp = obj["timestamp"]
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or stamp != stamp:
            raise InputError(f"{where(path, number)}: 'timestamp' must be a number of milliseconds, got {stamp!r}")
        hashes = obj.get("hash_ids") or []
        if not isinstance(hashes, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in hashes):
            raise InputError(f"{where(path, number)}: 'hash_ids' must be a list of integers")
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
        raise InputError(f"{where(path, line)}: '{column}' is neither seconds nor a date-time: {value!r}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


def csv_rows(fh: io.BufferedReader, path: str, fmt: str, digest: Any) -> Iterator[RawRow]:
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
                f"{where(path, 1)}: the {fmt} header needs {', '.join(want)}; missing {', '.join(missing)} (found {', '.join(names)})"
            )
        t_col, in_col, out_col = (names.index(c) for c in want)
        last = max(t_col, in_col, out_col)
        for row in reader:
            number = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) <= last:
                raise InputError(f"{where(path, number)}: {len(row)} columns, the header has {len(names)}")
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
        raise InputError(f"{where(path, reader.line_num)}: not valid CSV ({err})") from None
    finally:
        if not fh.closed:
            text.detach()  # the caller closes its own file
