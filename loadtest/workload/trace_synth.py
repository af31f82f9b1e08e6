"""``loadtest trace synth``: a trace in any of the three formats, for tests and for users without one.

A synthetic trace has what a replay needs and what a real one shows:

* arrivals at a mean ``rate`` per second, gamma gaps of shape ``burstiness``
  (1 is Poisson, below 1 burstier: the convention of ``load.burstiness`` and vLLM's
  ``--burstiness``; drawn here, not by the load stage, which this package does not import);
* input and output lengths from a normal distribution each (clipped at 1);
* a prefix-sharing structure (Mooncake's ``hash_ids``): ``prefix_groups``
  shared prefixes of ``prefix_blocks`` blocks each; a request draws a group
  (``prefix_share`` of requests do, the rest share nothing) and its prompt's
  first blocks are that group's, as long as its input is that long; the rest
  of its blocks are its own. Block ids are unique across the file except where
  shared, as in Mooncake's traces.

The same seed writes the same file. Azure's and BurstGPT's formats carry no
hashes: the structure is dropped there (their prompts share nothing).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import orjson

from loadtest.workload.trace import FORMATS

#: Azure's traces start on a real date; the synthetic ones start here.
_AZURE_EPOCH = datetime(2024, 5, 10, 0, 0, 0)


@dataclass(frozen=True)
class SynthSpec:
    """What a synthetic trace is drawn from."""

    rate_rps: float
    duration_s: float
    burstiness: float = 1.0
    input_mean: int = 512
    input_stddev: float = 0.0
    output_mean: int = 64
    output_stddev: float = 0.0
    prefix_groups: int = 0
    prefix_blocks: int = 1
    prefix_share: float = 1.0
    block_tokens: int = 512
    seed: int = 0


@dataclass(frozen=True)
class SynthRow:
    t_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...]


def synth_rows(spec: SynthSpec) -> list[SynthRow]:
    """The trace's rows, in time order."""
    rng = np.random.default_rng(np.random.SeedSequence([abs(int(spec.seed)), 28]))
    times = _gamma_arrivals(rng, spec.rate_rps, spec.duration_s, spec.burstiness)
    n = len(times)
    lengths_in = _lengths(rng, spec.input_mean, spec.input_stddev, n)
    lengths_out = _lengths(rng, spec.output_mean, spec.output_stddev, n)
    groups = rng.integers(0, max(1, spec.prefix_groups), n)
    shares = rng.random(n) < spec.prefix_share
    group_blocks = [[g * spec.prefix_blocks + b for b in range(spec.prefix_blocks)] for g in range(spec.prefix_groups)]
    next_id = spec.prefix_groups * spec.prefix_blocks
    rows = []
    for i in range(n):
        blocks = math.ceil(int(lengths_in[i]) / spec.block_tokens)
        ids: list[int] = []
        if spec.prefix_groups and shares[i]:
            ids = group_blocks[int(groups[i])][:blocks]
        own = blocks - len(ids)
        ids = ids + list(range(next_id, next_id + own))
        next_id += own
        rows.append(SynthRow(round(float(times[i]), 6), int(lengths_in[i]), int(lengths_out[i]), tuple(ids)))
    return rows


def _gamma_arrivals(rng: np.random.Generator, rate: float, duration_s: float, shape: float) -> np.ndarray:
    """Arrival times in [0, duration_s): cumulative gamma gaps of mean 1/rate and shape ``shape``."""
    mean_gap = 1.0 / rate
    times = np.empty(0)
    last = 0.0
    while last < duration_s:
        n = int(rate * duration_s + 6 * math.sqrt(rate * duration_s) + 16)
        more = last + np.cumsum(rng.gamma(shape, mean_gap / shape, n))
        times = np.concatenate([times, more])
        last = float(more[-1])
    return times[times < duration_s]


def _lengths(rng: np.random.Generator, mean: int, stddev: float, n: int) -> np.ndarray:
    if not stddev:
        return np.full(n, max(1, int(mean)))
    return np.maximum(1, np.rint(rng.normal(mean, stddev, n))).astype(int)


def write_trace(path: str | Path, fmt: str, rows: list[SynthRow]) -> None:
    """Write ``rows`` in ``fmt`` (see :mod:`loadtest.workload.trace` for the layouts)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown trace format {fmt!r}")
    with open(path, "w", newline="", encoding="utf-8") as fh:
        if fmt == "mooncake":
            for r in rows:
                obj = {"timestamp": int(round(r.t_s * 1000)), "input_length": r.input_tokens,
                       "output_length": r.output_tokens, "hash_ids": list(r.hash_ids)}
                fh.write(orjson.dumps(obj).decode() + "\n")
            return
        writer = csv.writer(fh)
        if fmt == "azure":
            writer.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
            for r in rows:
                stamp = (_AZURE_EPOCH + timedelta(seconds=r.t_s)).strftime("%Y-%m-%d %H:%M:%S.%f") + "0"
                writer.writerow([stamp, r.input_tokens, r.output_tokens])
            return
        writer.writerow(["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"])
        for r in rows:
            writer.writerow([f"{r.t_s:.3f}", "ChatGPT", r.input_tokens, r.output_tokens,
                             r.input_tokens + r.output_tokens, "Conversation log"])
