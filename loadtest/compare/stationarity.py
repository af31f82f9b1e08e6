"""Is a level steady? Whether its server changed while it ran, before the gate compares it at all.

A level whose server was still warming up, or that a neighbour joined half way,
measures two servers: its percentiles describe neither, and comparing them with
another run's says nothing about a change. Per request the decode speed (TPOT) is
looked at, else the whole time (e2e, for one-token replies). A level *drifts* when
both hold:

- its change is not chance: :func:`loadtest.compare.drift_scan.drift_pvalue`, a test
  on blocks of consecutive requests (p < :data:`MAX_PVALUE`). Not a test on the
  requests: in a closed loop they share the server's every decode step and stall, so
  they are not independent, and a rank test over them flagged 9 of 33 levels of an
  unchanged llama-server (that module says why and how well the blocks do);
- its size is past the gate's tolerance: the medians of the halves of its measured
  window (split at the middle, by start time) differ by more than it. A change the
  gate would call within tolerance cannot explain a change the gate judges, and a
  server that wanders by more than the tolerance has that wander in the run-to-run
  noise a history measures.

The gate treats every check at a drifting level as inconclusive and says why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from loadtest.analysis.capacity import fmt_ms
from loadtest.analysis.windows import level_windows
from loadtest.compare.drift_scan import drift_pvalue
from loadtest.compare.level_keys import USERS, LevelKey, load_text, window_key, window_unit

MAX_PVALUE = 0.001
#: Requests per half below which no drift can be told from noise.
MIN_PER_HALF = 8


@dataclass(frozen=True)
class Drift:
    concurrency: LevelKey  # the level's key (level_keys): its users, or a rate's req/s or speedup
    metric: str
    first: float  # median, first half (ms)
    second: float
    pvalue: float
    blocks: int = 0  # blocks of consecutive requests the test compared (0: not told)
    unit: str = USERS  # what the key counts: users, req/s or ×

    @property
    def change(self) -> float:
        return self.second / self.first - 1.0 if self.first > 0 else 0.0

    def text(self) -> str:
        return (f"the level at {load_text(self.concurrency, self.unit)} drifted within the run: median {self.metric} "
                f"{fmt_ms(self.first)} ms in its first half, {fmt_ms(self.second)} ms in its second "
                f"({self.change * 100:+.1f}%, p = {self.pvalue:.1g}{self._over()})")

    def _over(self) -> str:
        return f" over {self.blocks} blocks of consecutive requests" if self.blocks else ""


def drifting_levels(requests: pd.DataFrame, run: dict, frame: pd.DataFrame, tolerance: float) -> dict[LevelKey, Drift]:
    """The levels (by key: users, or a rate's req/s or speedup) whose speed changed beyond chance and
    whose halves differ beyond ``tolerance``."""
    windows, _ = level_windows(run, requests)
    trace = run.get("trace")
    unit = window_unit((w.rate_rps for w in windows), trace)
    start = frame["start_wall"].to_numpy(dtype=float)
    pos = frame["pos"].to_numpy()
    measured = frame["measured"].to_numpy()
    out: dict[LevelKey, Drift] = {}
    for p, window in enumerate(windows):
        mid = (window.window_start + window.end_wall) / 2.0
        mine = measured & (pos == p)
        for metric, column in (("tpot_ms", "tpot_sample"), ("e2e_ms", "e2e_sample")):
            values = frame[column].to_numpy(dtype=float)
            ok = mine & np.isfinite(values) & (values > 0)
            first, second = values[ok & (start < mid)], values[ok & (start >= mid)]
            if min(len(first), len(second)) < MIN_PER_HALF:
                continue
            order = np.argsort(start[ok], kind="stable")
            pvalue, blocks = drift_pvalue(np.log(values[ok][order]))
            key = window_key(window.concurrency, window.rate_rps, trace)
            drift = Drift(key, metric, float(np.median(first)), float(np.median(second)), pvalue, blocks, unit)
            if abs(drift.change) > tolerance and pvalue < MAX_PVALUE:
                out[key] = drift
            break  # TPOT when a level has it; e2e only for one-token replies
    return out


def drift_warning(label: str, drift: Drift, reference_runs: int | None = None) -> str:
    """The comparison's warning for a side's drifting level: its checks are held, or (``reference_runs``:
    a baseline judged among a history's runs) judged against those runs' mean and spread."""
    if reference_runs is None:
        return f"{label}: {drift.text()}; its checks are inconclusive"
    return (f"{label}: {drift.text()}; it is one of the {reference_runs} reference runs, so the level is judged "
            f"against their mean and spread")


def hold_drifting(change, drifts: dict[LevelKey, Drift]) -> None:
    """Make a check at a drifting level inconclusive (it may hide a regression when its interval
    reaches past the worse tolerance, as any inconclusive check), with the reason in its message."""
    drift = drifts.get(change.level) if change.level is not None else None
    if drift is None:
        return
    if change.verdict != "inconclusive":
        change.may_regress = change.verdict == "regression" or change.may_regress
    change.verdict = "inconclusive"
    change.message += f"; not compared: {drift.text()}"
