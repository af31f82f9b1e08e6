"""Per-level figures of the request kinds: the share of valid structured outputs
(``levels[].valid_output_rate``) and the input-side throughput (``input_tokens_per_s``,
``items_per_s``: what an embeddings endpoint serves).

A request that asked for tool calls or a JSON schema carries ``output_valid``
(see :mod:`loadtest.client.output_check`): did its answer parse and validate.
The rate is over the requests that started in the level's measured window,
ended ok and were checked; failed requests are already in the error rate, and
counting them here too would mix two questions. An invalid answer also never
counts as goodput (:mod:`frame`), so a server that gets faster by emitting
broken JSON shows a lower ``valid_output_rate`` *and* a lower goodput.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def validity_column(requests: pd.DataFrame) -> np.ndarray:
    """1.0 valid, 0.0 invalid, NaN not checked (records from before the column: all NaN)."""
    if "output_valid" not in requests:
        return np.full(len(requests), np.nan)
    values = requests["output_valid"]
    out = np.full(len(values), np.nan)
    known = values.notna().to_numpy()
    out[known] = values[known].astype(bool).to_numpy(dtype=float)
    return out


def valid_output_rate(valid: np.ndarray, here: np.ndarray) -> tuple[float | None, int]:
    """(share valid, how many were checked) among the rows ``here``; (None, 0) when none was checked."""
    checked = here & ~np.isnan(valid)
    n = int(checked.sum())
    if n == 0:
        return None, 0
    rate = float(valid[checked].mean())
    return (rate if math.isfinite(rate) else None), n


def input_rates(frame: pd.DataFrame, served: np.ndarray, duration_s: float) -> tuple[float | None, float | None]:
    """(prompt tokens/s, inputs/s) of the successful requests served in the window.

    ``served``: each request's share of its life inside the window (0 for a failure), as
    ``requests_per_s`` counts it (:func:`loadtest.analysis.windows.window_shares`), so for
    embeddings, whose output is no tokens, these are the throughput. Items are None without an
    ``items`` column (chat, completions); tokens None when no request had a count.
    """
    if duration_s <= 0:
        return None, None
    weights = np.asarray(served, dtype=float)

    def rate(column: str) -> float | None:
        if column not in frame:
            return None
        values = frame[column].to_numpy(dtype=float)
        known = np.isfinite(values) & (weights > 0)
        return float(np.sum(values[known] * weights[known])) / duration_s if known.any() else None

    return rate("prompt_tokens"), rate("items")
