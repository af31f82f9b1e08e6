"""Per-token gaps of Arrow chunk lists: the ITL of the live figures (the live view and the Prometheus export).

The analysis defines ITL per token (:mod:`loadtest.analysis.chunks`): a chunk of k tokens
spreads its gap over them, and a chunk of 0 tokens is not a token arrival. The live figures
read the same record batches as Arrow list columns while a run goes on; this is that
definition over them, in one place, so that neither shows a multi-token server's chunk gap
(k times the per-token figure) as its ITL.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def list_gaps(arr: pa.ListArray, tokens: pa.ListArray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-token gaps between consecutive chunks inside each list, and each gap's row.

    With ``tokens`` (``chunk_tokens``), as the analysis defines ITL (:mod:`loadtest.analysis.chunks`):
    a chunk of k tokens spreads its gap over them (``gap / k``, k times), and a chunk of 0 tokens
    is not a token arrival. So the live ITL is per token, as the final table's is, on a server
    that sends several tokens a chunk. A row whose token list does not match its chunks counts
    one token a chunk.
    """
    if len(arr) == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    offsets = arr.offsets.to_numpy()
    values = arr.values.to_numpy(zero_copy_only=False)[offsets[0] : offsets[-1]]
    offsets = offsets - offsets[0]
    lengths = np.diff(offsets)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    k = _chunk_tokens(tokens, lengths, len(values))
    if k is not None:
        values, rows, k = values[k > 0], rows[k > 0], k[k > 0]
    if len(values) < 2:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    gaps = np.diff(values)
    same_row = rows[1:] == rows[:-1]
    gaps, gap_rows = gaps[same_row], rows[1:][same_row]
    if k is None:
        return gaps, gap_rows
    later = k[1:][same_row]
    return np.repeat(gaps / later, later), np.repeat(gap_rows, later)


def _chunk_tokens(tokens: pa.ListArray | None, lengths: np.ndarray, n: int) -> np.ndarray | None:
    """Each chunk's tokens (int64), aligned with the flattened chunks; None when every chunk is one token."""
    if tokens is None or len(tokens) != len(lengths):
        return None
    t_offsets = tokens.offsets.to_numpy()
    t_values = tokens.values.to_numpy(zero_copy_only=False)[t_offsets[0] : t_offsets[-1]].astype(float)
    t_lengths = np.diff(t_offsets)
    match = t_lengths == lengths
    k = np.ones(n, dtype=np.float64)
    if match.any():
        k[np.repeat(match, lengths)] = t_values[np.repeat(match, t_lengths)]
    k = np.where(np.isnan(k), 1.0, np.rint(k)).astype(np.int64)
    return None if (k == 1).all() else k
