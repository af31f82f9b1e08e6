"""Open-loop send times: drawn in advance from a seeded arrival process.

An open-loop level is a rate, not a number of users: requests arrive on their
own schedule and a slow server does not slow the arrivals. The schedule of a
level is drawn *before* the level starts, so nothing the server does (or the
client's own busyness) can move it; a request that goes out late is late
against this schedule, and that lateness is measured, never absorbed.

Processes (``load.arrival``):

* ``poisson``: independent exponential gaps with mean ``1/rate``; the
  memoryless traffic of many independent clients;
* ``constant``: evenly spaced, ``1/rate`` apart (from a seeded phase, so that
  several workers' streams interleave instead of firing together);
* ``gamma``: gamma gaps with shape ``burstiness`` and mean ``1/rate``
  (coefficient of variation ``1/sqrt(burstiness)``): 1 is Poisson, below 1
  burstier, above 1 more regular. The same convention as vLLM's
  ``--burstiness``.

Each (seed, level, stream) gets its own independent random stream
(numpy ``SeedSequence``), so with ``--workers N`` each worker draws ``rate/N``
from its own stream and the superposition is Poisson at the full rate (the sum
of independent Poisson processes is Poisson).
"""

from __future__ import annotations

import math

import numpy as np

ARRIVALS = ("poisson", "constant", "gamma")


def stream_rng(seed: int, level_index: int, stream: int) -> np.random.Generator:
    """An independent generator per run seed, level and sending process."""
    return np.random.default_rng(np.random.SeedSequence([abs(int(seed)), int(level_index), int(stream)]))


def arrival_offsets(
    rate: float,
    duration_s: float,
    arrival: str,
    rng: np.random.Generator,
    *,
    burstiness: float | None = None,
) -> np.ndarray:
    """Send times (seconds from the level's start, ascending, all < ``duration_s``) at ``rate`` per second."""
    if arrival not in ARRIVALS:
        raise ValueError(f"unknown arrival process {arrival!r} (use one of {', '.join(ARRIVALS)})")
    if not (rate > 0 and duration_s > 0):
        return np.empty(0)
    mean_gap = 1.0 / rate
    if arrival == "constant":
        phase = rng.uniform(0.0, mean_gap)
        return phase + mean_gap * np.arange(math.ceil((duration_s - phase) / mean_gap))
    expected = rate * duration_s
    chunks: list[np.ndarray] = []
    total = 0.0
    while total < duration_s:
        n = int(expected + 6 * math.sqrt(expected) + 16)  # almost always one draw
        if arrival == "poisson":
            gaps = rng.exponential(mean_gap, n)
        else:
            shape = 1.0 if burstiness is None else float(burstiness)
            gaps = rng.gamma(shape, mean_gap / shape, n)
        times = total + np.cumsum(gaps)
        chunks.append(times)
        total = float(times[-1])
    times = np.concatenate(chunks)
    return times[times < duration_s]
