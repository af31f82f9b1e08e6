"""Did a level's speed change while it ran? A test on time blocks, not on requests.

Why not test the requests themselves: in a closed loop the requests of a level are
not independent draws. Concurrent requests share every decode step of the batch and
every prefill stall, and one user's next request starts when its last one ended, so a
server that is a little slower for half a second makes a run of consecutive requests
slower together. A rank test over requests (Mann-Whitney U, used until 2026-12-07)
counts each of them as fresh evidence: on an unchanged llama-server it called 9 of 33
levels "drifted" at p < 0.001, with signs both ways (a 0.1% test should flag about 1 in
1,000), and on simulated stationary levels whose requests share a server that wanders
by 10% with a 0.3 s memory it flagged 20-40% of them.

What this does instead (batch means, as Ibragimov and Müller's t-tests on a few group
estimates, 2010): the level's requests, in the order they started, are cut into
:data:`BLOCKS` blocks of consecutive requests (equal counts: a closed loop sends at a
steady pace, so equal counts are close to equal times, and each block's median then
has the same precision, which the test's null assumes). Each block gives one number,
the median of its requests' log values (log: a slowdown multiplies; the median: one
request stuck behind a prefill does not move its block). Requests that shared a
server's moment fall in one block, so the blocks are close to independent when the
server's memory is shorter than a block, and the sample size is the number of blocks,
not of requests.

The statistic asks the shapes a real change has: a step anywhere (a neighbour arrives
at some moment, a warm-up ends) and a trend (a server heating up or a queue that
grows). It is the largest of the two-segment t statistics over every split into two
runs of at least two blocks, and of the t statistic of a straight line's slope, each
with its own residual spread. Its p-value is from the same statistic on
:data:`NULL_DRAWS` series of independent normal blocks (seeded, so the same data give
the same answer): every part of it is free of the blocks' mean and scale, so under
independent normal blocks it is exact up to that Monte Carlo's error (about 1e-4 at
p = 0.001), whatever the level's speed. Comparing only the two halves was tried and
dropped: its spread, taken within each half, grows with the very change a step at a
third of the level or a ramp puts inside a half, and it caught none of those.

What it cannot do: tell a server that wanders as slowly as a block lasts from one
that drifted. In simulation (10 blocks, steady 6 s levels, 400-1,600 each) it flagged
0.3% of levels whose requests follow an AR(1) of 0.5 in log TPOT and 0.9% of 0.8 (the
request-wise test: 4% and 24%), 0.25-0.75% with a shared server wandering by 10% with a
0.3 s memory, and about 4% with a 1 s memory (the wander is then half a level's worth of
drift, as real as any; the request-wise test flagged 55-65%); longer levels have longer
blocks and are calibrated for slower wanders. With 8 blocks it was better calibrated
(1.5% at 1 s) but found half as many 1.4x steps; with 12, worse (9%). Against a 1.4x
step at a third, half or two thirds of a level on a server wandering by 5% it found all
of them, a ramp to 1.5x all, and a warm-up 1.6x slower for the first 40% all; with a
10% wander, half to two thirds of the steps and most warm-ups. A warm-up of a fifth of
the level it rarely holds: its halves' medians barely move, and the gate holds a level
only for a change past its tolerance (:mod:`loadtest.compare.stationarity`). On the
unchanged llama-server's 33 levels it flags 1, a level whose TPOT held at 4.9 ms for two
seconds and then wandered between 5.7 and 8 ms.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

#: Blocks a level is cut into: enough to place a step and estimate the spread (8 degrees of
#: freedom), few enough that each spans many requests (a 6 s level's block is 0.6 s).
BLOCKS = 10
#: Requests per block at the least, so a block's median is a median; fewer blocks otherwise.
MIN_PER_BLOCK = 4
#: Fewer blocks than this leave no split with two blocks a side and a spread: no test.
MIN_BLOCKS = 4
#: Series of independent blocks the p-value is read from.
NULL_DRAWS = 100_000
_NULL_SEED = 20261207
#: A spread of log values below this is rounding, not noise (identical requests would else read as a
#: certain change of 1e-16).
FLOOR = 1e-9


def block_medians(values: np.ndarray) -> np.ndarray:
    """The median of each of the blocks of consecutive ``values`` (in the order they started)."""
    n = min(BLOCKS, len(values) // MIN_PER_BLOCK)
    if n < MIN_BLOCKS:
        return np.zeros(0)
    return np.array([np.median(block) for block in np.array_split(np.asarray(values, dtype=float), n)])


def change_statistic(blocks: np.ndarray) -> np.ndarray:
    """For series of blocks (last axis): the largest |t| of a step at any split with two blocks or
    more a side (pooled spread of the two segments) and of a straight line's slope."""
    y = np.asarray(blocks, dtype=float)
    y = y - y.mean(axis=-1, keepdims=True)  # the statistic is free of the mean; centred, sums lose no digits
    n = y.shape[-1]
    cum, cum2 = np.cumsum(y, axis=-1), np.cumsum(y * y, axis=-1)
    total, total2 = cum[..., -1], cum2[..., -1]
    tiny = FLOOR**2
    best = np.zeros(y.shape[:-1])
    for k in range(2, n - 1):
        left, right = cum[..., k - 1] / k, (total - cum[..., k - 1]) / (n - k)
        within = (cum2[..., k - 1] - k * left**2) + (total2 - cum2[..., k - 1] - (n - k) * right**2)
        spread2 = np.maximum(within / (n - 2), tiny)
        best = np.maximum(best, np.abs(right - left) / np.sqrt(spread2 * (1 / k + 1 / (n - k))))
    x = np.arange(n) - (n - 1) / 2.0
    sxx = float(np.sum(x * x))
    slope = (y * x).sum(axis=-1) / sxx
    residual = y - slope[..., None] * x
    spread2 = np.maximum((residual * residual).sum(axis=-1) / (n - 2), tiny)
    return np.maximum(best, np.abs(slope) / np.sqrt(spread2 / sxx))


@lru_cache(maxsize=None)
def _null(n: int) -> np.ndarray:
    """The statistic over :data:`NULL_DRAWS` series of ``n`` independent normal blocks, sorted."""
    rng = np.random.default_rng(_NULL_SEED + n)
    return np.sort(change_statistic(rng.standard_normal((NULL_DRAWS, n))))


def drift_pvalue(values: np.ndarray) -> tuple[float, int]:
    """The chance that a steady level's blocks change as much as ``values``' do (log values, in the
    order their requests started), and the number of blocks; (1.0, 0) for too few requests."""
    blocks = block_medians(values)
    if len(blocks) == 0:
        return 1.0, 0
    null = _null(len(blocks))
    observed = float(change_statistic(blocks))
    beyond = len(null) - int(np.searchsorted(null, observed * (1 - 1e-12), side="left"))
    return (beyond + 1) / (len(null) + 1), len(blocks)
