"""Images per level: how many, how big, and TTFT against them (``levels[].images``).

Images are prefill: a request's TTFT grows with its images' count and pixels,
so the figure a reader needs beside the level's TTFT is TTFT *by image count*
and the sizes that were sent. Counts and bytes come from the records
(``images``, ``image_bytes``: what the load generator sent); the tokens the
server made of them are in ``prompt_tokens`` (``usage``, vision tokens included).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.columns import numeric

#: Requests per level kept for the report's TTFT-against-bytes scatter (not serialized).
PLOT_POINTS = 2000


def level_images(requests: pd.DataFrame, frame: pd.DataFrame, levels: Sequence[Any]) -> None:
    """Set ``level.images`` (None when the run sent no images); ``levels`` in window order."""
    counts = numeric(requests, "images")
    if np.isnan(counts).all():
        return
    sizes = numeric(requests, "image_bytes")
    pos = frame["pos"].to_numpy()
    ok = frame["ok"].to_numpy() & frame["measured"].to_numpy()
    ttft = frame["ttft_ms"].to_numpy(dtype=float)
    prompt = frame["prompt_tokens"].to_numpy(dtype=float)
    for p, level in enumerate(levels):
        mine = ok & (pos == p) & ~np.isnan(counts)
        if not mine.any():
            continue
        by_count = {}
        for count in sorted({int(c) for c in counts[mine]}):
            values = ttft[mine & (counts == count)]
            values = values[np.isfinite(values)]
            if len(values):
                by_count[str(count)] = {"p50": round(float(np.percentile(values, 50)), 3),
                                        "p95": round(float(np.percentile(values, 95)), 3), "n": int(len(values))}
        known = mine & np.isfinite(sizes) & np.isfinite(ttft)  # a URL's size is unknown: not on the scatter
        step = max(1, int(known.sum()) // PLOT_POINTS)
        level.samples["image_bytes"] = sizes[known][::step]
        level.samples["image_ttft_ms"] = ttft[known][::step]
        level.images = {
            "per_request": round(float(counts[mine].mean()), 4),
            # null when every request's size is unknown (images given as URLs the server fetches)
            "bytes_per_request": round(float(np.nanmean(sizes[mine])), 1) if np.isfinite(sizes[mine]).any() else None,
            "prompt_tokens_per_request": round(float(np.nanmean(prompt[mine])), 1) if np.isfinite(prompt[mine]).any() else None,
            "ttft_ms_by_count": by_count,
        }
