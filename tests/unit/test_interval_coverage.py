"""The intervals cover the truth on data shaped like real ITL samples.

Real per-token ITL samples are correlated twice over: every stream running at
one moment shares the server's decode step, and a chunk of k tokens repeats
its per-token gap k times. A bootstrap that resamples single samples takes
that repetition for evidence and gives intervals far too narrow. The
analyzer resamples blocks of time (analysis/intervals.py); this test measures
the coverage of its nominal 95% interval for the p95 over seeded replicates
of a synthetic level, against the true p95 of the process.
"""

from __future__ import annotations

import numpy as np

from loadtest.analysis.intervals import block_bootstrap_intervals, block_ids, block_length_s
from loadtest.analysis.metrics import describe

STREAMS = 16
TOKENS_PER_CHUNK = 4
STEP_MEDIAN_MS = 30.0
STEP_SIGMA = 0.35  # lognormal spread of one decode step
WINDOW_S = 20.0


def _level(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per-token ITL samples (ms) of one level and the wall time (s) of each.

    One sequence of decode steps is shared by all streams; stream j closes a
    chunk every k steps, at its own phase, and spreads the chunk's gap over k tokens.
    """
    n_steps = int(WINDOW_S * 1000 / STEP_MEDIAN_MS * 1.2)
    steps = STEP_MEDIAN_MS * np.exp(STEP_SIGMA * rng.standard_normal(n_steps))
    ends = np.cumsum(steps) / 1000.0
    values, times = [], []
    k = TOKENS_PER_CHUNK
    for j in range(STREAMS):
        phase = j % k
        bounds = np.arange(phase, n_steps, k)
        gaps = np.diff(np.concatenate([[0.0], np.cumsum(steps)])[bounds])
        at = ends[bounds[1:] - 1]
        values.append(np.repeat(gaps / k, k))
        times.append(np.repeat(at, k))
    values, times = np.concatenate(values), np.concatenate(times)
    inside = times < WINDOW_S
    return values[inside], times[inside]


def _true_p95() -> float:
    """p95 of the per-token ITL process: the mean of k consecutive steps (a long simulation)."""
    rng = np.random.default_rng(12345)
    steps = STEP_MEDIAN_MS * np.exp(STEP_SIGMA * rng.standard_normal((2_000_000, TOKENS_PER_CHUNK)))
    return float(np.quantile(steps.mean(axis=1), 0.95))


def _coverage(replicates: int, *, blocks: bool) -> float:
    truth = _true_p95()
    hits = 0
    for seed in range(replicates):
        rng = np.random.default_rng(seed)
        values, times = _level(rng)
        if blocks:
            ids = block_ids(times, 0.0, block_length_s(WINDOW_S))
            lo, hi = block_bootstrap_intervals(
                values, ids, {"p95": 0.95}, rng, resamples=500, confidence=0.95
            )["p95"]
        else:
            lo, hi = describe(values, rng, 500).ci["p95"]
        hits += lo <= truth <= hi
    return hits / replicates


def test_block_bootstrap_covers_the_true_p95_at_least_90_percent_of_the_time():
    coverage = _coverage(120, blocks=True)
    naive = _coverage(120, blocks=False)
    print(f"coverage of the nominal 95% interval for ITL p95: time blocks {coverage:.1%}, per-sample {naive:.1%}")
    assert coverage >= 0.90
    # resampling single samples is the mistake this design avoids: it covers far less often
    assert naive < coverage - 0.2


def test_too_few_samples_never_pass_even_when_every_sample_is_low():
    rng = np.random.default_rng(0)
    values = np.full(19, 10.0)  # p95 of 19 samples is just the maximum
    stats = describe(values, rng, 200, blocks=np.arange(19))
    assert stats.ci["p95"][1] == np.inf and stats.ci["p50"][1] < np.inf
    # few time blocks: the variability cannot be estimated, so no upper bound either
    stats = describe(np.full(400, 10.0), rng, 200, blocks=np.repeat(np.arange(3), [100, 150, 150]))
    assert stats.ci["p95"][1] == np.inf
