"""Reading record columns as plain numpy arrays, whatever pandas made of them.

``records.read_requests`` goes through ``pyarrow.Table.to_pandas``: nullable
ints become float with NaN, a bool column with a null becomes ``object``, and a
list column becomes an object array of numpy arrays (or an ``ArrowDtype`` if
the caller asked for one). The analyzer wants float/bool/int arrays and flat
list values, so every column access goes through these few helpers instead of
repeating the dtype guesses.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def numeric(frame: pd.DataFrame, name: str) -> np.ndarray:
    """Column as float64 (null → NaN); all-NaN when the column is absent."""
    if name not in frame.columns:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def boolean(frame: pd.DataFrame, name: str, default: bool = False) -> np.ndarray:
    """Column as bool (null → ``default``)."""
    if name not in frame.columns:
        return np.full(len(frame), default, dtype=bool)
    col = frame[name]
    return col.astype(object).where(col.notna(), default).astype(bool).to_numpy()


def text(frame: pd.DataFrame, name: str) -> np.ndarray:
    """Column as an object array of str or None."""
    if name not in frame.columns:
        return np.full(len(frame), None, dtype=object)
    col = frame[name].astype(object)
    return col.where(col.notna(), None).to_numpy(dtype=object)


def flatten_list(
    frame: pd.DataFrame, name: str, dtype: type | None = np.float64
) -> tuple[np.ndarray, np.ndarray]:
    """Flatten a list column: (values concatenated over rows, length of each row).

    Null rows have length 0. Null items become NaN (float) — pass
    ``dtype=None`` to keep the stored dtype when it has no nulls (a list of
    int32 stays int32, so callers can skip NaN handling). Runs as one C-level
    concatenation, not a Python loop over values: 100k rows × 100 items take
    ~0.15 s.
    """
    n = len(frame)
    if name not in frame.columns or n == 0:
        return np.empty(0, dtype=dtype), np.zeros(n, dtype=np.int64)
    col = frame[name]
    if isinstance(col.dtype, pd.ArrowDtype):
        return flatten_arrow(col.array.__arrow_array__(), dtype)
    items = col.to_numpy(dtype=object)
    lengths = np.fromiter((_length(a) for a in items), dtype=np.int64, count=n)
    parts = [np.asarray(a) for a, size in zip(items, lengths, strict=True) if size]
    values = np.concatenate(parts) if parts else np.empty(0)
    return _as(values, dtype), lengths


def flatten_arrow(
    arr: pa.Array | pa.ChunkedArray, dtype: type | None = np.float64
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`flatten_list` of an Arrow list array: the same values and lengths, without pandas.

    Without nulls among the items the values are a zero-copy (read-only) view
    of Arrow's buffer; null lists have length 0 whatever their offsets say.
    """
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(arr)
    values = flat.to_numpy(zero_copy_only=False) if len(flat) else np.empty(0)
    return _as(values, dtype), lengths.astype(np.int64)


def _length(item: object) -> int:
    if item is None or isinstance(item, float):  # None / NaN for a null list
        return 0
    return len(item)  # type: ignore[arg-type]


def _as(values: np.ndarray, dtype: type | None) -> np.ndarray:
    """Cast to ``dtype`` (None: keep numeric dtypes); null items (None/NaN) become NaN."""
    if values.dtype == object:
        values = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    if dtype is None:
        return values
    return values.astype(dtype, copy=False)
