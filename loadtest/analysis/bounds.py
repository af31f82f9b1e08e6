"""What limits each level: the decode fit and roofline reading of an analyzed closed-loop run.

Why here: an ordinary ``run`` already measures ITL against concurrency, which
is the decode curve. So the same fit ``loadtest profile`` uses
(:mod:`decode_fit`) is applied to its levels, and each level is named by its
bound (:mod:`roofline`): ``memory``/``compute``/``overhead`` from the floors
when the scenario declares ``hardware:`` and ``model:``, else from the fit
alone (``compute`` past the knee; below it ``memory_or_overhead``: without
floors an overhead-bound server cannot be told from a memory-bound one, and
``basis`` says which reading was used).

The batch size of a level is its users, or the server's own running count
(p50 over the level) where scraped: with more users than slots, the batch is
the slots. Pure functions over :class:`~loadtest.analysis.results.Analysis`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from loadtest.analysis.decode_fit import DecodeFit, DecodePoint, fit_decode
from loadtest.analysis.roofline import Ceilings, ModelSize, fit_bound, read_decode


@dataclass
class LevelBound:
    concurrency: int
    sequences: float
    bound: str
    basis: str  # "roofline" | "fit"
    context_tokens: float
    reading: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"bound": self.bound, "basis": self.basis, "sequences": self.sequences, "context_tokens": self.context_tokens}
        if self.reading:
            out.update(self.reading)
        return out


def running_sequences(analysis: Any, level: Any) -> float:
    """The level's batch: the server's running count (p50) where scraped, else its users.

    For a fleet, one replica's batch: the per-pod mean (a decode step runs on one replica).

    At least one: the gauge is sampled over wall time, so a scrape can land in the
    gap between one user's requests and count 0, and the p50 of a few scrapes at
    one user can read 0.5. A token gap was measured, so a sequence was running.
    """
    server = getattr(analysis, "server", None)
    if server is not None:
        signal = server.first_of_role("running")
        if signal is not None:
            stats = server.pod_stats(level.index, signal.metric)
            if stats is not None and stats.n and math.isfinite(stats.p50) and stats.p50 > 0:
                return max(1.0, float(stats.p50))
    return float(level.concurrency)


def mean_context(analysis: Any, level: Any) -> float:
    """Mean context a decode step reads at this level: prompt + half the output, of its successful requests.

    Successful only: a request cut at the level's end streamed part of its
    output, but while it ran its context grew as a whole one's does.
    """
    frame = analysis.requests
    if frame is None or not len(frame) or "prompt_tokens" not in frame:
        return math.nan
    here = (
        frame["measured"].to_numpy() & frame["ok"].to_numpy()
        & (frame["pos"].to_numpy() == _position(analysis, level))
    )
    prompt = frame["prompt_tokens"].to_numpy(dtype=float)[here]
    output = frame["completion_tokens"].to_numpy(dtype=float)[here]
    if not len(prompt) or np.isnan(prompt).all():
        return math.nan
    return float(np.nanmean(prompt) + np.nanmean(output) / 2.0)


def _position(analysis: Any, level: Any) -> int:
    """The level's position in window order (the frame's ``pos``): levels are sorted by load, windows by index."""
    order = sorted(lv.index for lv in analysis.levels)
    return order.index(level.index)


def decode_points(analysis: Any) -> list[DecodePoint]:
    """One point per closed-loop level with ITL (the last run of a repeated concurrency wins)."""
    by_n: dict[float, DecodePoint] = {}
    for lv in sorted(analysis.levels, key=lambda lv: lv.index):
        if lv.rate_rps is not None or not math.isfinite(lv.itl_ms.p50):
            continue
        n = running_sequences(analysis, lv)
        by_n[n] = DecodePoint(n, lv.itl_ms.p50, lv.itl_ms.p95, lv.output_tokens_per_s, lv.tpot_ms.p50)
    return list(by_n.values())


def level_bounds(
    analysis: Any, fit: DecodeFit | None, ceilings: Ceilings | None = None, model: ModelSize | None = None
) -> dict[int, LevelBound]:
    """Each closed-loop level's bound, keyed by level index."""
    out: dict[int, LevelBound] = {}
    for lv in analysis.levels:
        if lv.rate_rps is not None or not math.isfinite(lv.itl_ms.p50):
            continue
        n = running_sequences(analysis, lv)
        context = mean_context(analysis, lv)
        if ceilings is not None and model is not None:
            reading = read_decode(ceilings, model, lv.itl_ms.p50, n, context if math.isfinite(context) else 0.0)
            if reading is not None:
                out[lv.index] = LevelBound(lv.concurrency, n, reading.bound, "roofline", context, reading.to_dict())
                continue
        if fit is not None:
            out[lv.index] = LevelBound(lv.concurrency, n, fit_bound(fit.side(n)), "fit", context)
    return out


def fit_run(analysis: Any) -> DecodeFit | None:
    """The decode fit of a run's closed-loop levels (None with fewer than two)."""
    return fit_decode(decode_points(analysis))
