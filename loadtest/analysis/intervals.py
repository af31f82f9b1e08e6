"""Percentile intervals that respect how latency samples are correlated.

Latency samples are not independent draws:

* every stream running at one moment shares the server's decode step, so the
  ITL samples of c streams in one step are one observation repeated c times;
* a chunk that carries k tokens repeats its per-token gap k times;
* requests sent while a queue builds up all wait long together.

Resampling single samples (or single chunks) treats each of those as new
evidence and gives intervals far too narrow. So we resample **blocks of time**:
the measured window is cut into short blocks (at least :data:`MIN_BLOCK_S`, and
about :data:`TARGET_BLOCKS` of them), each sample goes to the block in which it
happened (a request's start, a chunk's arrival), and each bootstrap replicate
draws whole blocks with replacement. Whatever is shared within a block (a step,
a multi-token chunk, a queue episode) is resampled together.

The replicates are computed without materializing them: each block becomes a
histogram over a common support (the exact sorted values for samples up to
:data:`EXACT_SUPPORT`, else :data:`BINS` geometric bins whose bounds are the
smallest and largest sample inside each bin, so a bound is never optimistic),
a replicate is a vector of block multiplicities, and its weighted histogram is
one matrix product. The cost is O(resamples × blocks × support), independent of
how many million ITL samples a level holds.

Two guards keep the interval from claiming more than the data can say:

* fewer than :data:`MIN_BLOCKS` blocks: there is no honest estimate of the
  variability, so the upper bound is +inf (the check can fail, never pass);
* too few samples for the percentile (``n × (1 − q) < 1``: p95 from fewer than
  20 samples is just the maximum): the upper bound is +inf as well.

A percentile bootstrap cannot go above the sample maximum, so without the
second guard "every sample under the limit" would be a certain pass at n = 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from loadtest.quantiles import sample_bounds

#: Shortest block, in seconds: several decode steps of any real server.
MIN_BLOCK_S = 0.25
#: Blocks aimed for per window (fewer when the window is short).
TARGET_BLOCKS = 30
#: Below this many non-empty blocks the variability cannot be estimated.
MIN_BLOCKS = 5
#: Samples up to this many use their exact values as the support.
EXACT_SUPPORT = 4096
#: Geometric bins for larger samples (bin width ≈ 0.5% for a 10⁴ range).
BINS = 2048


def block_length_s(window_s: float) -> float:
    """Block length for a measured window of ``window_s`` seconds (see module doc)."""
    if not window_s > 0:
        return MIN_BLOCK_S
    return max(MIN_BLOCK_S, window_s / TARGET_BLOCKS)


def block_ids(times: np.ndarray, origin: float, block_s: float) -> np.ndarray:
    """Index of the time block holding each time (``origin`` = the window's start)."""
    times = np.asarray(times, dtype=float)
    ids = np.floor((times - origin) / block_s)
    return np.where(np.isfinite(ids), ids, -1).astype(np.int64)


def _support(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bin of each value, lowest value per bin, highest value per bin); inf gets its own bin."""
    finite = np.isfinite(values)
    if len(values) <= EXACT_SUPPORT:
        grid, index = np.unique(values, return_inverse=True)
        return index.reshape(-1), grid, grid
    all_finite = bool(finite.all())
    fin = values if all_finite else values[finite]
    positive = np.where(fin > 0, fin, np.inf).min() if len(fin) else np.inf
    lo = float(positive) if np.isfinite(positive) else 1e-3
    hi = float(fin.max()) if len(fin) else lo
    edges = np.geomspace(lo, max(hi, lo * (1 + 1e-9)), BINS)
    index = bin_of(values if all_finite else np.where(finite, values, 0.0), edges)
    if not all_finite:
        index = np.where(finite, index, BINS + 1)
    n_bins = BINS + 2
    low = np.full(n_bins, np.inf)
    high = np.full(n_bins, -np.inf)
    np.minimum.at(low, index, values)
    np.maximum.at(high, index, values)
    low[BINS + 1] = high[BINS + 1] = np.inf
    return index, low, high  # empty bins are never chosen: the cumulative count is flat there


def bin_of(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``np.searchsorted(edges, values, side="left")`` for geometric ``edges``, exactly, in a few linear passes.

    A binary search per value is the slowest step of a level's interval at
    10M ITL samples (cache misses on every probe). The bin is instead guessed
    from the logarithm, which the geometric edges make almost always right,
    and then moved until ``edges[i - 1] < value ≤ edges[i]`` holds, which is
    the definition of the searchsorted index, so the result is the same.
    ``values`` must be finite (no NaN); ``edges`` increasing and positive.
    """
    n_edges = len(edges)
    if n_edges < 2 or not (edges[0] > 0 and np.all(np.diff(edges) > 0)):
        return np.searchsorted(edges, values, side="left")
    padded = np.concatenate([[-np.inf], edges, [np.inf]])  # padded[i] = edges[i - 1]; padded[i + 1] = edges[i]
    step = math.log2(edges[-1] / edges[0]) / (n_edges - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        guess = np.log2(values)  # ≤ 0 gives -inf or NaN, both clipped to bin 0 below
    guess -= math.log2(edges[0])
    guess /= step
    np.ceil(guess, out=guess)
    np.fmax(guess, 0.0, out=guess)  # fmax/fmin: NaN becomes the bound
    np.fmin(guess, float(n_edges), out=guess)
    index = guess.astype(np.int64)
    del guess
    todo: np.ndarray | slice = slice(None)
    for _ in range(n_edges + 1):  # each round moves a wrong index one bin; a guess is off by one at most
        here, at = values[todo], index[todo]
        low = padded[at] >= here  # edges[i - 1] ≥ value: i is too high
        high = padded[at + 1] < here  # edges[i] < value: i is too low
        wrong = np.flatnonzero(low | high)
        if not len(wrong):
            break
        todo = wrong if isinstance(todo, slice) else todo[wrong]
        index[todo] += high[wrong].astype(np.int64) - low[wrong].astype(np.int64)
    return index


def block_index(blocks: np.ndarray) -> tuple[int, np.ndarray]:
    """``np.unique(blocks, return_inverse=True)`` as (number of distinct blocks, inverse), by counting.

    Block ids are small integers (a window holds a few dozen blocks), so one
    ``bincount`` finds the distinct ids and a lookup table ranks them: two
    linear passes instead of a sort of every sample. Wide ranges fall back to
    ``np.unique``.
    """
    if not len(blocks):
        return 0, np.zeros(0, dtype=np.int64)
    lo, hi = int(blocks.min()), int(blocks.max())
    if hi - lo > max(1 << 16, 4 * len(blocks)):
        keys, inverse = np.unique(blocks, return_inverse=True)
        return len(keys), inverse.reshape(-1)
    shifted = blocks - lo if lo else blocks
    present = np.bincount(shifted, minlength=hi - lo + 1) > 0
    rank = np.cumsum(present) - 1
    return int(present.sum()), rank[shifted]


def _block_histograms(blocks: np.ndarray, index: np.ndarray, n_support: int) -> np.ndarray:
    """Counts per (non-empty block, support bin), blocks in ascending id order, as np.unique ranks them.

    Block ids span a few dozen values, so the histogram is counted over the
    whole id range at once and the empty blocks' rows dropped: no ranking
    pass over the samples (see :func:`block_index` for wide ranges).
    """
    lo, hi = (int(blocks.min()), int(blocks.max())) if len(blocks) else (0, 0)
    if hi - lo > max(1 << 12, len(blocks) // n_support):
        m, inverse = block_index(blocks)
        return np.bincount(inverse * n_support + index, minlength=m * n_support).reshape(m, n_support)
    flat = blocks - lo if lo else blocks
    flat = flat.astype(np.int64) * n_support
    flat += index
    hist = np.bincount(flat, minlength=(hi - lo + 1) * n_support).reshape(hi - lo + 1, n_support)
    return hist[hist.sum(axis=1) > 0]  # a block is in np.unique's keys iff a sample is in it


@dataclass(frozen=True)
class BlockHistogram:
    """A sample binned over its support (see module doc) and counted per time block."""

    index: np.ndarray  # the support bin of each value (bins in value order: every value of a bin ≤ the next's)
    low: np.ndarray  # lowest value per bin
    high: np.ndarray  # highest value per bin
    hist: np.ndarray  # counts per (non-empty block, bin)


def block_histogram(values: np.ndarray, blocks: np.ndarray) -> BlockHistogram:
    """The binning :func:`block_bootstrap_intervals` resamples (also the exact percentiles' shortcut, see metrics)."""
    index, low, high = _support(np.asarray(values, dtype=float))
    return BlockHistogram(index, low, high, _block_histograms(np.asarray(blocks), index, len(low)))


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for these small matrices: einsum's own loop, ~8× faster than a threaded BLAS call here
    (whole numbers: the same sums in any order)."""
    return np.einsum("rm,mg->rg", a, b)


class _ReplicateRanks:
    """Each replicate's cumulative histogram (``cumsum(weights @ hist)``), searched without making it whole.

    The full cumulative counts are replicates × bins (1000 × 2050); only the
    bin where each replicate reaches a rank is needed. So bins are summed in
    groups of :data:`GROUP` first, the group is found there, and only that
    group's bins are counted out. All counts are whole numbers far below
    2⁵³, exact in floating point in any order, so each bin found is the one
    the full cumulative sum gives.
    """

    GROUP = 64

    def __init__(self, weights: np.ndarray, hist: np.ndarray) -> None:
        m, n_bins = hist.shape
        n_groups = -(-n_bins // self.GROUP)
        self.weights = weights
        padded = np.zeros((m, n_groups * self.GROUP))
        padded[:, :n_bins] = hist
        grouped = padded.reshape(m, n_groups, self.GROUP)
        self.spans = np.ascontiguousarray(grouped.transpose(1, 0, 2))  # group → (blocks × its bins)
        self.group_cum = np.cumsum(_product(weights, grouped.sum(axis=2)), axis=1)
        self.total = self.group_cum[:, -1]

    def bins_reaching(self, k: np.ndarray) -> np.ndarray:
        """Per replicate, how many bins have a cumulative count below ``k`` (``(cum < k).sum(axis=1)``)."""
        group = (self.group_cum < k[:, None]).sum(axis=1)
        out = group * self.GROUP
        for g in np.unique(group).tolist():
            if g >= self.group_cum.shape[1]:
                continue  # k above every count: every bin counted already
            rows = np.flatnonzero(group == g)
            before = self.group_cum[rows, g - 1] if g else np.zeros(len(rows))
            cum = np.cumsum(_product(self.weights[rows], self.spans[g]), axis=1) + before[:, None]
            out[rows] += (cum < k[rows, None]).sum(axis=1)
        return out


def block_bootstrap_intervals(
    values: np.ndarray,
    blocks: np.ndarray,
    qs: dict[str, float],
    rng: np.random.Generator,
    *,
    resamples: int,
    confidence: float,
    histogram: BlockHistogram | None = None,
) -> dict[str, tuple[float, float]]:
    """Central ``confidence`` interval of each quantile in ``qs`` (see module doc).

    ``values`` may hold +inf (failures); ``blocks`` gives each value's time
    block; ``histogram`` is their :func:`block_histogram` when already made.
    """
    n = len(values)
    if n == 0:
        return {name: (math.nan, math.nan) for name in qs}
    if histogram is None:
        histogram = block_histogram(values, blocks)
    low, high, hist = histogram.low, histogram.high, histogram.hist
    n_support = len(low)
    m = len(hist)
    weights = rng.multinomial(m, np.full(m, 1.0 / m), size=resamples).astype(float)
    ranks = _ReplicateRanks(weights, hist)
    alpha = 1.0 - confidence
    out: dict[str, tuple[float, float]] = {}
    for name, q in qs.items():
        # the k-th smallest of N resampled values, k = floor(q (N − 1)) + 1 (type 7's lower neighbour)
        k = np.floor(q * (ranks.total - 1) + 1e-9) + 1
        at = np.minimum(ranks.bins_reaching(k), n_support - 1)
        lo = float(np.quantile(low[at], alpha / 2, method="lower"))
        hi = float(np.quantile(high[at], 1 - alpha / 2, method="higher"))
        if m < MIN_BLOCKS:  # too few blocks to estimate the variability above
            hi = math.inf
        out[name] = sample_bounds((lo, hi), n, q, confidence)
    return out
