"""Confidence intervals: bootstrap for percentiles, Wilson for the error rate.

A verdict is only as good as the sample behind it: a p99 from 40 requests is
noise. Every percentile the analyzer reports therefore carries a 95% interval,
and an SLO check whose interval straddles its limit is "uncertain" instead of
a coin flip.

**Exact bootstrap of an order statistic, in O(B).** The classic percentile
bootstrap draws B resamples of size n and takes each one's quantile: O(B·n)
work, which is why implementations subsample large arrays (and thereby widen
the interval). We do not need the resamples themselves, only their order
statistics near the quantile. Resampling index ``floor(n·U)`` with U uniform is
exactly resampling with replacement, and ``floor`` is monotone, so the k-th
smallest resampled index is ``floor(n·U₍ₖ₎)`` where ``U₍ₖ₎ ~ Beta(k, n−k+1)`` is
the k-th order statistic of n uniforms. Given ``U₍ₖ₎ = u``, the next one is
``u + (1−u)·Beta(1, n−k)``. Drawing those two Betas B times gives the *same
distribution* as the full bootstrap (with type-7 interpolation between the two
neighbours) for any n, in O(B) time and memory, with no subsampling. Only
the order statistics at the drawn ranks are then looked up (see
:func:`quantiles.order_statistics`), so not even a full sort is needed.
"""

from __future__ import annotations

from statistics import NormalDist
import math
import zlib

import numpy as np

from loadtest.quantiles import lerp, position, quantile_sorted

#: Resamples per interval. 1000 keeps the Monte Carlo error of a 95% bound
#: well below the interval's own width; cost is O(B), independent of n.
DEFAULT_RESAMPLES = 1000
CONFIDENCE = 0.95


def rng_for(seed: int, *keys: str | int) -> np.random.Generator:
    """A generator seeded from ``seed`` and stable keys (level, metric).

    Each interval gets its own stream so that results do not depend on the
    order in which levels or metrics are processed (Python's ``hash`` is salted
    per process, hence CRC32).
    """
    parts = [seed] + [zlib.crc32(str(k).encode()) for k in keys]
    return np.random.default_rng(parts)


def bootstrap_ranks(
    n: int, q: float, rng: np.random.Generator, resamples: int = DEFAULT_RESAMPLES
) -> tuple[np.ndarray, np.ndarray, float]:
    """Ranks (0-based, into the sorted sample) that each bootstrap replicate's quantile uses.

    Returns ``(lower, upper, t)``: replicate i's type-7 quantile is
    ``lerp(sorted[lower[i]], sorted[upper[i]], t)`` (see module doc).
    """
    lo, t = position(n, q)
    k = lo + 1  # 1-based rank of the lower neighbour
    u1 = rng.beta(k, n - k + 1, size=resamples)
    lower = np.minimum((u1 * n).astype(np.int64), n - 1)
    if t == 0.0 or k >= n:
        return lower, lower, 0.0
    u2 = u1 + (1.0 - u1) * rng.beta(1, n - k, size=resamples)
    upper = np.minimum((u2 * n).astype(np.int64), n - 1)
    return lower, upper, t


def bootstrap_quantile_draws(
    sorted_values: np.ndarray, q: float, rng: np.random.Generator, resamples: int = DEFAULT_RESAMPLES
) -> np.ndarray:
    """``resamples`` bootstrap replicates of the type-7 quantile ``q`` of an ascending sample."""
    n = len(sorted_values)
    if n == 0:
        return np.full(resamples, math.nan)
    if n == 1:
        return np.full(resamples, float(sorted_values[0]))
    lower, upper, t = bootstrap_ranks(n, q, rng, resamples)
    return lerp(sorted_values[lower], sorted_values[upper], t)


def percentile_interval(draws: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central ``confidence`` interval of bootstrap replicates (inf-safe)."""
    if len(draws) == 0 or np.isnan(draws).all():
        return (math.nan, math.nan)
    ordered = np.sort(draws)
    alpha = 1.0 - confidence
    return (quantile_sorted(ordered, alpha / 2), quantile_sorted(ordered, 1 - alpha / 2))


def bootstrap_quantile_ci(
    sorted_values: np.ndarray,
    q: float,
    rng: np.random.Generator,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile-bootstrap interval for quantile ``q`` of an ascending sample."""
    if len(sorted_values) == 0:
        return (math.nan, math.nan)
    return percentile_interval(bootstrap_quantile_draws(sorted_values, q, rng, resamples), confidence)


def wilson_interval(failures: int, total: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    Unlike the normal approximation it stays inside [0, 1] and is sensible at
    0 failures, which is the common case for an error budget.
    """
    if total <= 0:
        return (math.nan, math.nan)
    z = _z(confidence)
    p = failures / total
    z2n = z * z / total
    denom = 1.0 + z2n
    centre = (p + z2n / 2.0) / denom
    half = z * math.sqrt(p * (1.0 - p) / total + z * z / (4.0 * total * total)) / denom
    lo = 0.0 if failures == 0 else max(0.0, centre - half)  # exact bounds at the edges,
    hi = 1.0 if failures == total else min(1.0, centre + half)  # not float noise
    return (lo, hi)


def _z(confidence: float) -> float:
    """Two-sided normal quantile (exact for the default 95%)."""
    if abs(confidence - 0.95) < 1e-12:
        return 1.959963984540054

    return NormalDist().inv_cdf(0.5 + confidence / 2.0)
