"""Per-level metrics: latency distributions, throughput, goodput and errors.

Inputs are the per-request frame (:mod:`frame`) and the per-token ITL samples
(:mod:`chunks`), both already tagged with a window position. Outputs are
:class:`LevelResult` objects without verdicts (see :mod:`verdict`).

Rates are per second of *measured window* (``end_wall − window_start``):

* ``requests_per_s``: successful requests served in the window, each counted
  by the share of its life (send to end) inside it
  (:func:`windows.window_shares`: counting the ones that *ended* there miscounts
  a short window by a batch of lock-step users). This is the rate at which the
  endpoint delivered answers at this concurrency. At a rate, the life from the
  first token, and the window shifted by a request's life
  (:mod:`served_span`: the level's own completions, however short the window);
* ``output_tokens_per_s``: tokens whose chunk *arrived* in the window;
* ``goodput_rps``: the same for the requests that met every
  per-request limit (see :func:`frame._meets_limits`);
* ``error_rate``: failed / all requests that *started* in the window (not in
  warmup), with a Wilson interval at the run's confidence. Requests the harness cancelled (users
  stopped at a level change) are in neither count.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.bootstrap import (
    CONFIDENCE,
    DEFAULT_RESAMPLES,
    bootstrap_ranks,
    percentile_interval,
    rng_for,
    wilson_interval,
)
from loadtest.analysis.output_validity import input_rates, valid_output_rate
from loadtest.analysis.open_loop import open_loop_stats
from loadtest.analysis.served_span import DROPPED, rate_weights, served_span
from loadtest.analysis.intervals import (
    EXACT_SUPPORT,
    block_bootstrap_intervals,
    block_histogram,
    block_ids,
    block_length_s,
)
from loadtest.quantiles import binned_order_statistics, lerp, order_statistics, position, sample_bounds
from loadtest.analysis.results import REPORTED, LevelResult, Stats
from loadtest.analysis.windows import LevelWindow, served_from, window_shares
from loadtest.metric_registry import BY_NAME, LATENCY_METRICS, PERCENTILES

#: Finite samples kept per level and metric for the report's box plots.
PLOT_SAMPLES = 2000


def describe(
    values: np.ndarray,
    rng: np.random.Generator,
    resamples: int = DEFAULT_RESAMPLES,
    *,
    blocks: np.ndarray | None = None,
    confidence: float = CONFIDENCE,
) -> Stats:
    """Stats of a sample (any order, no NaN) that may contain +inf failures.

    Point percentiles are exact order statistics (:func:`order_statistics`, so a
    million-value ITL sample is never fully sorted). Their intervals resample
    whole time ``blocks`` (see :mod:`intervals`); without blocks every sample is
    taken as independent (its own block), which is only right for data that
    really is, e.g. synthetic tests.
    """
    n = len(values)
    if n == 0:
        return Stats()
    infinite = np.isinf(values)
    n_failed = int(infinite.sum())
    finite = values[~infinite] if n_failed else values
    plans = [(pct, *position(n, PERCENTILES[pct])) for pct in REPORTED]
    ranks = np.array([r for _, lo, _t in plans for r in (lo, min(lo + 1, n - 1))], dtype=np.int64)
    # the intervals bin the sample anyway; above the exact support the bins also find the ranks in one pass
    histogram = block_histogram(values, blocks) if blocks is not None else None
    looked_up = None
    if histogram is not None and n > EXACT_SUPPORT:
        looked_up = binned_order_statistics(values, histogram.index, histogram.hist.sum(axis=0), ranks)
    if looked_up is None:
        looked_up = order_statistics(values, ranks)
    out = {pct: float(lerp(looked_up[2 * i], looked_up[2 * i + 1], t)) for i, (pct, _lo, t) in enumerate(plans)}
    qs = {pct: PERCENTILES[pct] for pct in REPORTED}
    if blocks is None:
        ci = {pct: _independent_interval(values, q, rng, resamples, confidence) for pct, q in qs.items()}
    else:
        ci = block_bootstrap_intervals(
            values, blocks, qs, rng, resamples=resamples, confidence=confidence, histogram=histogram
        )
    return Stats(
        n=n,
        n_failed=n_failed,
        mean=float(finite.mean()) if len(finite) else math.nan,
        max=float(finite.max()) if len(finite) else math.nan,
        ci=ci,
        **out,
    )


def _independent_interval(
    values: np.ndarray, q: float, rng: np.random.Generator, resamples: int, confidence: float
) -> tuple[float, float]:
    """Bootstrap interval for independent samples (exact order-statistic draws, O(resamples))."""
    n = len(values)
    if n == 1:  # one sample bounds nothing above, and below only where quantiles.lower_unbounded allows
        return sample_bounds((float(values[0]), math.inf), 1, q, confidence)
    b_lo, b_hi, b_t = bootstrap_ranks(n, q, rng, resamples)
    drawn = order_statistics(values, np.concatenate([b_lo, b_hi]))
    return sample_bounds(percentile_interval(lerp(drawn[: len(b_lo)], drawn[len(b_lo) :], b_t), confidence),
                         n, q, confidence)


def _rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.nan


def _plot_sample(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    finite = values[np.isfinite(values)]
    if len(finite) > PLOT_SAMPLES:
        finite = rng.choice(finite, PLOT_SAMPLES, replace=False)
    return finite


def level_results(
    frame: pd.DataFrame,
    windows: Sequence[LevelWindow],
    itl_groups: Sequence[tuple[np.ndarray, np.ndarray]],
    tokens_in_window: np.ndarray,
    *,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> list[LevelResult]:
    """One :class:`LevelResult` per window (same order as ``windows``), checks not yet set.

    ``itl_groups`` holds, per window, the ITL samples and the time block of
    each (:func:`intervals.block_ids` of the arrival of the chunk it came from,
    see :mod:`chunk_pass`); per-request samples are placed in time by their start.
    Intervals are at ``confidence`` (see :mod:`verdict` for why it may exceed 95%).
    """
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
    samples = {m: frame[BY_NAME[m].sample_column].to_numpy(dtype=float) for m in LATENCY_METRICS if BY_NAME[m].per == "request"}
    start = frame["start_wall"].to_numpy(dtype=float)
    end = frame["end_wall"].to_numpy(dtype=float)
    ttft = frame["ttft_ms"].to_numpy(dtype=float)
    ttfb = frame["ttfb_ms"].to_numpy(dtype=float)
    valid = frame["output_valid"].to_numpy(dtype=float) if "output_valid" in frame else np.full(len(frame), np.nan)

    results: list[LevelResult] = []
    for p, window in enumerate(windows):
        here = measured & (pos == p)
        mine = here & ~cancelled  # harness-cancelled requests are censored, not counted
        started = int(mine.sum())
        failed_here = mine & failed
        errors = int(failed_here.sum())
        by_kind = pd.Series(kinds[failed_here]).fillna("unknown").value_counts()
        ended_ok = ok & (end_pos == p)
        # each success by the share of its life inside the window (windows.window_shares: why not by its
        # end), its served life at a rate (windows.served_from: not its wait in a growing queue), and at a
        # rate its end in the window shifted by a request's life (served_span: the level's own completions)
        begin = served_from(start, ttft, window.rate_rps is not None, ttfb)
        duration = window.duration_s
        span = served_span(frame, window.window_start, window.end_wall, window.start_wall, window.decision,
                           mine & (kinds != DROPPED)) if window.rate_rps is not None else None
        lo, hi = (span.start, span.end) if span is not None else (window.window_start, window.end_wall)
        served_s = span.seconds if span is not None else duration
        served = (rate_weights(frame, mine & (kinds != DROPPED), lo, hi) if span is not None
                  else np.where(ok, window_shares(begin, end, lo, hi), 0.0))

        stats: dict[str, Stats] = {}
        plot: dict[str, np.ndarray] = {}
        block_s = block_length_s(duration)
        for metric in LATENCY_METRICS:
            rng = rng_for(seed, window.index, metric)
            if BY_NAME[metric].per == "gap":  # ITL: gaps between chunks, not one sample per request
                values, blocks = itl_groups[p] if p < len(itl_groups) else (np.empty(0), np.empty(0, dtype=np.int64))
            else:
                column = samples[metric]
                keep = (pos == p) & ~np.isnan(column)
                values, blocks = column[keep], block_ids(start[keep], window.window_start, block_s)
            stats[metric] = describe(values, rng, resamples, blocks=blocks, confidence=confidence)
            if BY_NAME[metric].report_knee:  # the report's box plots
                plot[metric] = _plot_sample(values, rng)

        loop = open_loop_stats(frame, window, p, span) if window.rate_rps is not None else None
        client = dict(window.client)
        if loop is not None and loop["client_late"]:
            lag = loop["schedule_lag_ms"]
            client.update(
                saturated=True,
                reason=f"{lag['late']} of {lag['n']} sends later than {lag['late_ms']:g} ms "
                f"(send lag p99 {lag['p99']:.1f} ms)",
            )
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
                error_rate_ci=wilson_interval(errors, started, confidence),
                errors_by_kind={str(k): int(v) for k, v in by_kind.items()},
                completed=int(ended_ok.sum()),
                complete=int((complete & (pos == p)).sum()),
                spillover=int((spill & here).sum()),
                cancelled=int((here & cancelled).sum()),
                requests_per_s=_rate(float(served.sum()), served_s),
                output_tokens_per_s=_rate(float(tokens_in_window[p]) if p < len(tokens_in_window) else 0.0, duration),
                goodput_rps=_rate(float(served[good].sum()), served_s),
                served_span=(lo, hi),
                client_saturated=window.client_saturated or bool(loop and loop["client_late"]),
                client=client,
                decision=dict(window.decision),
                samples=plot,
                ttft_ms=stats["ttft_ms"],
                itl_ms=stats["itl_ms"],
                tpot_ms=stats["tpot_ms"],
                e2e_ms=stats["e2e_ms"],
                ttfb_ms=stats["ttfb_ms"],
                rate_rps=window.rate_rps,
                open_loop=loop,
            )
        )
        results[-1].valid_output_rate, results[-1].valid_output_checked = valid_output_rate(valid, mine & ok)
        if results[-1].valid_output_rate is not None:
            n_valid = round(results[-1].valid_output_rate * results[-1].valid_output_checked)
            results[-1].valid_output_ci = wilson_interval(n_valid, results[-1].valid_output_checked, confidence)
        results[-1].input_tokens_per_s, results[-1].items_per_s = input_rates(frame, served, served_s)
    return results
