"""A closed-loop level whose requests share one server's moments, as the drift check sees it.

Why: a llama-server batches its concurrent requests into one decode step and stalls them
all for a prefill, and its speed wanders (CPU frequency, neighbours, caches) with some
memory. So requests that run together, or one after the other, are slow or fast together:
stationary, yet strongly correlated in time. Independent draws per request miss that, and a
drift test tried only on them looks calibrated when it is not (a trial's test flagged 9 of 33
levels of an unchanged server at p < 0.001).

:func:`closed_loop_level` simulates ``users`` users sending back-to-back requests to a server
whose per-token time is ``step_ms`` (growing with the batch) times ``exp(OU(t))``: an
Ornstein-Uhlenbeck wander of standard deviation ``sigma`` (in log) and memory ``memory_s``,
times an optional ``change(t)`` (a real drift: a step, a warm-up, a ramp). Each request's
TPOT is that speed averaged over its decode, so concurrent requests share it.
:func:`drift_inputs` lays such a level out as :func:`loadtest.compare.stationarity.drifting_levels`
reads a run.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from support.synthetic import level_plan

T0 = 1_764_000_000.0
DT = 0.005  # the server's speed is drawn every 5 ms


def closed_loop_level(
    seed: int,
    users: int,
    *,
    duration_s: float = 6.0,
    sigma: float = 0.08,
    memory_s: float = 0.2,
    change: Callable[[np.ndarray], np.ndarray] | None = None,
    tokens: int = 32,
    ttft_ms: float = 30.0,
    step_ms: float = 1.0,
    jitter: float = 0.03,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start times (s from the level's start), TPOT (ms) and e2e (ms) of the level's requests, by start."""
    rng = np.random.default_rng(seed)
    grid = np.arange(0.0, duration_s + 10.0, DT)
    keep = np.exp(-DT / memory_s)
    shocks = rng.standard_normal(len(grid)) * sigma * np.sqrt(1 - keep * keep)
    wander = np.empty(len(grid))
    wander[0] = rng.standard_normal() * sigma
    for i in range(1, len(grid)):
        wander[i] = keep * wander[i - 1] + shocks[i]
    speed = np.exp(wander) * (change(grid) if change is not None else 1.0)
    area = np.concatenate([[0.0], np.cumsum(speed) * DT])
    per_token = step_ms * (1.0 + (users - 1))  # every sequence of the batch adds a step's work
    starts, tpots, e2es = [], [], []
    for _ in range(users):
        t = rng.uniform(0.0, 0.05)
        while t < duration_s:
            begin = t + ttft_ms / 1000.0
            i0 = int(begin / DT)
            span = tokens * per_token / 1000.0 * speed[min(i0, len(grid) - 1)]
            i1 = min(max(i0 + 1, int((begin + span) / DT)), len(grid) - 1)
            tpot = per_token * (area[i1] - area[i0]) / ((i1 - i0) * DT) * np.exp(jitter * rng.standard_normal())
            e2e = ttft_ms + tokens * tpot
            starts.append(t)
            tpots.append(tpot)
            e2es.append(e2e)
            t += e2e / 1000.0 + 0.001
    order = np.argsort(starts, kind="stable")
    return np.array(starts)[order], np.array(tpots)[order], np.array(e2es)[order]


def drift_inputs(start_s: np.ndarray, tpot_ms: np.ndarray, e2e_ms: np.ndarray, users: int, duration_s: float = 6.0):
    """``(requests, run, frame)`` of a one-level run holding these requests, all measured."""
    run = {"levels": level_plan([users], duration_s, t0=T0), "warmup_s": 0.0}
    n = len(start_s)
    start_wall = T0 + np.asarray(start_s, dtype=float)
    requests = pd.DataFrame({"start_wall": start_wall, "e2e_ms": e2e_ms, "level_index": np.zeros(n), "level": np.full(n, users)})
    frame = pd.DataFrame({"start_wall": start_wall, "pos": np.zeros(n, dtype=int), "measured": np.ones(n, dtype=bool),
                          "tpot_sample": tpot_ms, "e2e_sample": e2e_ms})
    return requests, run, frame


def ar1_level(seed: int, n: int = 80, phi: float = 0.7, sigma: float = 0.1, tpot_ms: float = 1.0, tokens: int = 32):
    """One user's ``n`` back-to-back requests whose log TPOT is an AR(1) in request order (``phi``: how
    much of one request's slowness the next keeps): start times (s), TPOT and e2e (ms)."""
    rng = np.random.default_rng(seed)
    log = np.empty(n)
    log[0] = rng.standard_normal() * sigma
    shocks = rng.standard_normal(n) * sigma * np.sqrt(1 - phi * phi)
    for i in range(1, n):
        log[i] = phi * log[i - 1] + shocks[i]
    tpot = tpot_ms * np.exp(log) * 2.0  # about 70 ms a request: 80 of them fill a 6 s level
    e2e = 5.0 + tokens * tpot
    start = np.concatenate([[0.0], np.cumsum(e2e[:-1] / 1000.0 + 0.001)])
    return start, tpot, e2e
