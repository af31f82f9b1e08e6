"""Bootstrap replicates of one run's metric at one level, resampling requests.

Each function returns ``resamples`` replicates of a statistic, drawn by
resampling the level's requests with replacement (a cluster bootstrap: a
drawn request brings all of its samples). The comparison draws both runs
independently and turns each pair of replicates into one replicate of the
*change*; the central interval of those, at the confidence the verdicts use,
is the change's interval.

* **Percentiles** (TTFT, ITL, TPOT, e2e): the type-7 quantile of the pooled
  samples of the drawn requests, computed from per-replicate weights on one
  sorted copy of the sample (+inf failures sort last, as in the analyzer).
* **Throughput** (output tokens/s, counted by chunk arrival in the window as
  in the summary): in a closed loop of c users, throughput = c × (tokens per
  request) / (time per request) (Little's law), so its sampling noise is the
  noise of the ratio Σ tokens / Σ request time. A replicate is the observed
  rate scaled by that ratio over the drawn requests (those that ended in the
  window) against the ratio over all of them. Resampling the *count* instead
  would claim a spread a closed loop does not have, and a ratio of whole
  requests would move with the mix of long and short outputs drawn.
* **Error rate**: the failed share of the drawn requests.
"""

from __future__ import annotations

import math

import numpy as np

from loadtest.quantiles import quantile_sorted
from loadtest.compare.samples import Clustered

#: Replicates per change interval (the analyzer's own intervals use 1000 too).
RESAMPLES = 1000
#: Upper bound on replicates × samples held in memory at once.
_BLOCK_CELLS = 4_000_000


def multinomial_counts(n: int, rng: np.random.Generator, size: int) -> np.ndarray:
    """How often each of ``n`` requests is drawn, per replicate (size × n)."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=size)


def percentile_replicates(
    sample: Clustered, q: float, rng: np.random.Generator, resamples: int = RESAMPLES
) -> np.ndarray:
    """Replicates of quantile ``q`` (0..1) under request resampling; NaN without samples.

    A replicate's quantile is the sample at a target rank of the pooled,
    weighted sample. Cumulating all n weights per replicate costs O(B·n)
    (20 s for a million ITL samples), but the target rank almost always
    falls in a narrow band of the original order around ``q``: the weight
    below that band is one matrix-vector product per replicate (O(m)), and
    only the band is cumulated. A replicate whose rank falls outside the band
    is recomputed in full, so the result is exact either way.
    """
    n = len(sample.values)
    m = sample.n_owners
    if n == 0 or m == 0:
        return np.full(resamples, math.nan)
    order = np.argsort(sample.values, kind="stable")
    values = sample.values[order]
    owner = sample.owner[order]
    half = min(0.5, max(0.01, 10.0 * math.sqrt(q * (1.0 - q) / m)))
    lo_r = int(max(0.0, q - half) * n)
    hi_r = min(n, int(math.ceil(min(1.0, q + half) * n)) + 1)
    per_owner = np.bincount(owner, minlength=m).astype(float)
    below = np.bincount(owner[:lo_r], minlength=m).astype(float)
    band = owner[lo_r:hi_r]
    in_band = np.bincount(band, minlength=m).astype(float)
    out = np.empty(resamples)
    block = max(1, _BLOCK_CELLS // max(hi_r - lo_r, m))
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        counts = multinomial_counts(m, rng, size)
        total = counts @ per_owner
        h = q * np.maximum(total - 1, 0)
        lo_rank = np.floor(h + 1e-9)
        t = np.where(h - lo_rank < 1e-9, 0.0, h - lo_rank)
        base = counts @ below
        inside = (lo_rank >= base) & (lo_rank + 1 < base + counts @ in_band)
        lo_idx = np.empty(size, dtype=np.int64)
        hi_idx = np.empty(size, dtype=np.int64)
        if inside.any():
            cum = np.cumsum(counts[inside][:, band], axis=1)
            local = (lo_rank[inside] - base[inside])[:, None]
            lo_idx[inside] = lo_r + (cum <= local).sum(axis=1)
            hi_idx[inside] = lo_r + (cum <= local + 1).sum(axis=1)
        outside = ~inside
        if outside.any():  # the rare replicate far from the original quantile: every weight
            cum = np.cumsum(counts[outside][:, owner], axis=1)
            lo_idx[outside] = (cum <= lo_rank[outside][:, None]).sum(axis=1)
            hi_idx[outside] = (cum <= lo_rank[outside][:, None] + 1).sum(axis=1)
        lo_v, hi_v = values[np.minimum(lo_idx, n - 1)], values[np.minimum(hi_idx, n - 1)]
        with np.errstate(invalid="ignore"):
            mixed = lo_v + (hi_v - lo_v) * t
        picked = np.where(t == 0.0, lo_v, np.where(np.isinf(hi_v) | np.isinf(lo_v), np.inf, mixed))
        out[start : start + size] = np.where(total > 0, picked, math.nan)
    return out


def throughput_replicates(
    rate: float, e2e_ms: np.ndarray, tokens: np.ndarray, rng: np.random.Generator, resamples: int = RESAMPLES
) -> np.ndarray:
    """Replicates of a closed-loop token rate (see module doc); the rate itself when nothing ended."""
    m = len(e2e_ms)
    if m == 0 or not math.isfinite(rate):
        return np.full(resamples, rate)
    speed = float(tokens.sum()) / float(e2e_ms.sum()) if e2e_ms.sum() > 0 else 0.0
    if speed <= 0:
        return np.full(resamples, rate)
    counts = multinomial_counts(m, rng, resamples)
    with np.errstate(divide="ignore", invalid="ignore"):
        drawn = (counts @ tokens) / (counts @ e2e_ms)
    return rate * drawn / speed


def share_replicates(flags: np.ndarray, rng: np.random.Generator, resamples: int = RESAMPLES) -> np.ndarray:
    """Replicates of the share of True among ``flags`` (the error rate); NaN when empty."""
    n = len(flags)
    if n == 0:
        return np.full(resamples, math.nan)
    counts = multinomial_counts(n, rng, resamples)
    return counts @ flags.astype(float) / n


def relative_change(candidate: np.ndarray | float, baseline: np.ndarray | float) -> np.ndarray:
    """``candidate / baseline − 1``, defined for the edge cases a gate meets.

    +inf values are percentiles reached by failures: both infinite is no
    change, only the candidate's is +inf (as bad as it gets), only the
    baseline's is −100%. A zero baseline gives +inf for any positive candidate.
    """
    c = np.asarray(candidate, dtype=float)
    b = np.asarray(baseline, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        plain = c / b - 1.0
    out = np.where(np.isinf(c) & np.isinf(b), 0.0, plain)
    out = np.where(np.isinf(b) & np.isfinite(c), -1.0, out)
    out = np.where(np.isinf(c) & np.isfinite(b), np.inf, out)
    out = np.where((b == 0) & np.isfinite(c), np.where(c > 0, np.inf, 0.0), out)
    return np.where(np.isnan(c) | np.isnan(b), np.nan, out)


def central_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    """The central ``confidence`` interval of replicates, ignoring NaN (inf-safe)."""
    finite = replicates[~np.isnan(replicates)]
    if len(finite) == 0:
        return (math.nan, math.nan)
    ordered = np.sort(finite)
    alpha = (1.0 - confidence) / 2.0
    return (quantile_sorted(ordered, alpha), quantile_sorted(ordered, 1.0 - alpha))

