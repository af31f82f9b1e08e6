"""One self-check figure over one level, in bounded memory however long the level runs.

The self-monitor (:mod:`loadtest.load.monitor`) keeps one value per read of
each stream reader: how late that read's stamp can be. At 100 streams that is
about a thousand values a second, and they were kept for the whole level: a
two-hour soak level held some 60 MB of them, which is the RSS creep the soak
benchmark showed (``benchmarks/bench_soak.py --probe``: malloc's mmapped bytes
grew by exactly 8 bytes a read, with Python's own objects flat).

A :class:`LevelSample` keeps the values exactly up to :data:`EXACT_CAP` of
them, so every ordinary level (a few minutes) gives the very figures it gave
before. Past the cap it folds them into a fixed log-spaced histogram whose
bins are 0.1% wide, and keeps the exact minimum and maximum: quantiles are
then within 0.05% of the exact ones (well under the 3 decimals run.json
keeps for sub-millisecond delays), and the memory no longer grows.
"""

from __future__ import annotations

import math

import numpy as np

#: Values kept exactly before folding into the histogram (2 MB of float64).
EXACT_CAP = 250_000
#: The histogram spans 1e-4 ms (0.1 µs) to 1e6 ms (17 minutes), bins 0.1% wide.
_LOW_MS, _HIGH_MS, _RATIO = 1e-4, 1e6, 1.001
_N_BINS = int(math.ceil(math.log(_HIGH_MS / _LOW_MS) / math.log(_RATIO)))
_LOG_LOW, _LOG_RATIO = math.log(_LOW_MS), math.log(_RATIO)


class LevelSample:
    """Values of one figure (ms): exact up to :data:`EXACT_CAP`, a fine histogram past it.

    Empty, it reads as the single value 0.0, as the monitor's figures always
    have (a level in which nothing was read was not late).
    """

    __slots__ = ("_parts", "_n_exact", "_counts", "_min", "_max", "_cap")

    def __init__(self, cap: int = EXACT_CAP) -> None:
        self._parts: list[np.ndarray] = []
        self._n_exact = 0
        #: Bin 0 holds values below _LOW_MS (zeros), the last those at or above _HIGH_MS.
        self._counts: np.ndarray | None = None
        self._min = math.inf
        self._max = -math.inf
        self._cap = cap

    def __len__(self) -> int:
        return self._n_exact + (int(self._counts.sum()) if self._counts is not None else 0)

    @property
    def folded(self) -> bool:
        """Whether the values are held as a histogram (the level passed the cap)."""
        return self._counts is not None

    def add(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=np.float64)
        if not len(values):
            return
        self._min = min(self._min, float(values.min()))
        self._max = max(self._max, float(values.max()))
        if self._counts is not None:
            self._fold(values)
            return
        self._parts.append(values)
        self._n_exact += len(values)
        if self._n_exact > self._cap:
            self._counts = np.zeros(_N_BINS + 2, dtype=np.int64)
            for part in self._parts:
                self._fold(part)
            self._parts, self._n_exact = [], 0

    def _fold(self, values: np.ndarray) -> None:
        assert self._counts is not None
        with np.errstate(divide="ignore"):
            index = np.floor((np.log(np.maximum(values, 0.0)) - _LOG_LOW) / _LOG_RATIO) + 1
        index = np.clip(np.nan_to_num(index, nan=0.0, neginf=0.0), 0, _N_BINS + 1).astype(np.int64)
        self._counts += np.bincount(index, minlength=_N_BINS + 2)

    def values(self) -> np.ndarray:
        """The exact values (only while not folded): what the figures were computed from before."""
        if self._counts is not None:
            raise ValueError("folded: only quantiles remain")
        return np.concatenate(self._parts) if self._parts else np.zeros(1)

    def quantiles(self, qs: "np.ndarray | list[float] | tuple[float, ...]") -> np.ndarray:
        """``np.quantile`` of the values (exact while not folded, to a bin's width after)."""
        qs = np.asarray(qs, dtype=np.float64)
        if self._counts is None:
            return np.quantile(self.values(), qs)
        cumulative = np.cumsum(self._counts)
        n = int(cumulative[-1])
        ranks = np.floor(qs * (n - 1)).astype(np.int64)  # 0-based rank of the value at q
        bins = np.searchsorted(cumulative, ranks, side="right")
        mids = np.exp(_LOG_LOW + (bins - 0.5) * _LOG_RATIO)  # the geometric middle of the bin
        mids = np.where(bins == 0, 0.0, mids)
        return np.clip(mids, self._min, self._max)

    def percentile(self, p: float) -> float:
        return float(self.quantiles([p / 100.0])[0])

    def max(self) -> float:
        return float(self._max) if self._max > -math.inf else 0.0
