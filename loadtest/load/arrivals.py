"""Open-loop send times: drawn in advance from a seeded arrival process.

An open-loop level is a rate, not a number of users: requests arrive on their
own schedule and a slow server does not slow the arrivals. The schedule of a
level is drawn *before* the level starts, so nothing the server does (or the
client's own busyness) can move it; a request that goes out late is late
against this schedule, and that lateness is measured, never absorbed.

Processes (``load.arrival``):

* ``poisson``: independent exponential gaps with mean ``1/rate``; the
  memoryless traffic of many independent clients;
* ``constant``: evenly spaced, ``1/rate`` apart, from a seeded phase;
* ``gamma``: gamma gaps with shape ``burstiness`` and mean ``1/rate``
  (coefficient of variation ``1/sqrt(burstiness)``): 1 is Poisson, below 1
  burstier, above 1 more regular. The same convention as vLLM's
  ``--burstiness``.

Each (seed, level, stream) gets its own independent random stream
(numpy ``SeedSequence``). With ``--workers N`` (:func:`share_offsets`):

* ``poisson``: each worker draws ``rate/N`` from its own stream; the
  superposition is Poisson at the full rate (the sum of independent Poisson
  processes is Poisson), so nothing is lost by drawing apart;
* ``constant`` and ``gamma``: a superposition of independent streams is
  neither (two evenly spaced streams with random phases arrive in near-pairs;
  merged gamma streams drift towards Poisson). So every worker draws the
  *one-process* schedule from the shared stream (seed, level, 0), which every
  worker computes alike without any message, and keeps arrivals ``k``,
  ``k + N``, ``k + 2N``, … (``k`` its worker index), as trace replay splits
  its rows. The server sees the one-process schedule, whatever ``N``.
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


def share_offsets(
    rate: float,
    duration_s: float,
    arrival: str,
    *,
    seed: int,
    level_index: int,
    streams: int = 1,
    stream: int = 0,
    burstiness: float | None = None,
) -> np.ndarray:
    """One sending process's share of a level's arrivals: ``stream`` of ``streams`` (see the module doc).

    Why two ways: Poisson streams may be drawn apart (their superposition is
    Poisson at the full rate), while constant and gamma ones must be one
    schedule dealt out, or the merged arrivals are not the process asked for.
    With one stream both ways give the same schedule as before.
    """
    streams = max(1, int(streams))
    stream = int(stream) % streams
    if arrival == "poisson":
        rng = stream_rng(seed, level_index, stream)
        return arrival_offsets(rate / streams, duration_s, arrival, rng, burstiness=burstiness)
    merged = arrival_offsets(rate, duration_s, arrival, stream_rng(seed, level_index, 0), burstiness=burstiness)
    return merged[stream::streams]
