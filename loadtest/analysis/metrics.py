"""Per-level metrics: latency distributions, throughput, goodput and errors.

Inputs are the per-request frame (:mod:`frame`) and the per-token ITL samples
(:mod:`chunks`), both already tagged with a window position. Outputs are
:class:`LevelResult` objects without verdicts (see :mod:`verdict`).

Rates are per second of *measured window* (``end_wall − window_start``):

* ``requests_per_s``: successful requests that *ended* in the window. This is
  the rate at which the endpoint delivered answers at this concurrency,
  whichever level the request started in;
* ``output_tokens_per_s``: tokens whose chunk *arrived* in the window;
* ``goodput_rps``: the subset of ``requests_per_s`` that met every
  per-request limit (see :func:`frame._meets_limits`);
* ``error_rate``: failed / all requests that *started* in the window (not in
  warmup), with a Wilson 95% interval. Requests the harness cancelled (users
  stopped at a level change) are in neither count.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.bootstrap import (
    DEFAULT_RESAMPLES,
    bootstrap_ranks,
    percentile_interval,
    rng_for,
    wilson_interval,
)
from loadtest.analysis.quantiles import lerp, order_statistics, position
from loadtest.analysis.results import REPORTED, LevelResult, Stats
from loadtest.analysis.slo import PERCENTILES
from loadtest.analysis.windows import LevelWindow

#: Finite samples kept per level and metric for the report's box plots.
PLOT_SAMPLES = 2000

LATENCY_METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "ttfb_ms")


def describe(values: np.ndarray, rng: np.random.Generator, resamples: int = DEFAULT_RESAMPLES) -> Stats:
    """Stats of a sample (any order, no NaN) that may contain +inf failures.

    All order statistics needed (each percentile's two neighbours and every
    bootstrap replicate's) are gathered first and looked up in one
    :func:`order_statistics` call, so a million-value ITL sample is never
    fully sorted.
    """
    n = len(values)
    if n == 0:
        return Stats()
    infinite = np.isinf(values)
    n_failed = int(infinite.sum())
    finite = values[~infinite] if n_failed else values
    plans = []
    for pct in REPORTED:
        lo, t = position(n, PERCENTILES[pct])
        if n == 1:
            b_lo = b_hi = np.zeros(resamples, dtype=np.int64)
            b_t = 0.0
        else:
            b_lo, b_hi, b_t = bootstrap_ranks(n, PERCENTILES[pct], rng, resamples)
        plans.append((pct, lo, min(lo + 1, n - 1), t, b_lo, b_hi, b_t))
    ranks = np.concatenate([np.concatenate([[lo, hi], b_lo, b_hi]) for _, lo, hi, _, b_lo, b_hi, _ in plans])
    looked_up = order_statistics(values, ranks)
    out: dict[str, float] = {}
    ci: dict[str, tuple[float, float]] = {}
    offset = 0
    for pct, _lo, _hi, t, b_lo, _b_hi, b_t in plans:
        m = len(b_lo)
        v_lo, v_hi = looked_up[offset], looked_up[offset + 1]
        draws_lo = looked_up[offset + 2 : offset + 2 + m]
        draws_hi = looked_up[offset + 2 + m : offset + 2 + 2 * m]
        offset += 2 + 2 * m
        out[pct] = float(lerp(v_lo, v_hi, t))
        ci[pct] = percentile_interval(lerp(draws_lo, draws_hi, b_t))
    return Stats(
        n=n,
        n_failed=n_failed,
        mean=float(finite.mean()) if len(finite) else math.nan,
        max=float(finite.max()) if len(finite) else math.nan,
        ci=ci,
        **out,
    )


def _rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.nan


def _clean(values: np.ndarray) -> np.ndarray:
    return values[~np.isnan(values)]


def _plot_sample(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    finite = values[np.isfinite(values)]
    if len(finite) > PLOT_SAMPLES:
        finite = rng.choice(finite, PLOT_SAMPLES, replace=False)
    return finite


def level_results(
    frame: pd.DataFrame,
    windows: Sequence[LevelWindow],
    itl_groups: Sequence[np.ndarray],
    tokens_in_window: np.ndarray,
    *,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
) -> list[LevelResult]:
    """One :class:`LevelResult` per window (same order as ``windows``), checks not yet set."""
    pos = frame["pos"].to_numpy()
    end_pos = frame["end_pos"].to_numpy()
    measured = frame["measured"].to_numpy()
    ok = frame["ok"].to_numpy()
    failed = frame["failed"].to_numpy()
    cancelled = frame["cancelled"].to_numpy()
    good = frame["good"].to_numpy()
    spill = frame["spillover"].to_numpy()
    complete = frame["complete"].to_numpy()
    kinds = frame["error_kind"].to_numpy(dtype=object)
    samples = {m: frame[m.replace("_ms", "_sample")].to_numpy(dtype=float) for m in LATENCY_METRICS if m != "itl_ms"}

    results: list[LevelResult] = []
    for p, window in enumerate(windows):
        here = measured & (pos == p)
        mine = here & ~cancelled  # harness-cancelled requests are censored, not counted
        started = int(mine.sum())
        failed_here = mine & failed
        errors = int(failed_here.sum())
        by_kind = pd.Series(kinds[failed_here]).fillna("unknown").value_counts()
        ended_ok = ok & (end_pos == p)
        duration = window.duration_s

        stats: dict[str, Stats] = {}
        plot: dict[str, np.ndarray] = {}
        for metric in LATENCY_METRICS:
            rng = rng_for(seed, window.index, metric)
            if metric == "itl_ms":
                values = itl_groups[p] if p < len(itl_groups) else np.empty(0)
            else:
                values = _clean(samples[metric][pos == p])
            stats[metric] = describe(values, rng, resamples)
            if metric in ("ttft_ms", "itl_ms"):
                plot[metric] = _plot_sample(values, rng)

        results.append(
            LevelResult(
                index=window.index,
                concurrency=window.concurrency,
                refine=window.refine,
                start_wall=window.start_wall,
                end_wall=window.end_wall,
                window_start=window.window_start,
                window_s=duration,
                requests=started,
                errors=errors,
                error_rate=errors / started if started else math.nan,
                error_rate_ci=wilson_interval(errors, started),
                errors_by_kind={str(k): int(v) for k, v in by_kind.items()},
                completed=int(ended_ok.sum()),
                complete=int((complete & (pos == p)).sum()),
                spillover=int((spill & here).sum()),
                cancelled=int((here & cancelled).sum()),
                requests_per_s=_rate(float(ended_ok.sum()), duration),
                output_tokens_per_s=_rate(float(tokens_in_window[p]) if p < len(tokens_in_window) else 0.0, duration),
                goodput_rps=_rate(float((ended_ok & good).sum()), duration),
                client_saturated=window.client_saturated,
                client=dict(window.client),
                samples=plot,
                ttft_ms=stats["ttft_ms"],
                itl_ms=stats["itl_ms"],
                tpot_ms=stats["tpot_ms"],
                e2e_ms=stats["e2e_ms"],
                ttfb_ms=stats["ttfb_ms"],
            )
        )
    return results
