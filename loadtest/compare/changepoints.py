"""Change points in a history of runs: where a check's series shifted, by how much, and which run did it.

A gate between two runs asks whether *this* run differs from *that* one; a
history asks whether the series moved. Shifts are found by Apache Otava's
change-point detection (the E-Divisive means method as used by MongoDB's
performance CI and by Hunter: sliding windows, a permutation-free Student's t
test on each candidate split, weak points merged bottom-up,
:func:`otava.analysis.compute_change_points`), not by a home-made test.

Each series is one check (an SLO percentile, output tokens/s or at a rate the
completed share, the error rate) at one level (users, or a rate run's rate or
speedup), over the runs of one workload fingerprint, oldest
first. A change point at index ``i`` means run ``i`` is the first of the new
level: it *introduced* the shift. Its size is the relative change of the
segment means (absolute for the error rate), and "worse" follows the check's
direction (latency and errors up, throughput down).

The gate (``loadtest history --fail-on-change-point``) fails when the newest
run starts, or continues within :data:`RECENT_RUNS` runs, a change point that
is worse by more than the tolerance.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

from loadtest.compare.level_keys import USERS, LevelKey, level_key, load_text
from loadtest.compare.summary_values import check_value

#: Otava's significance threshold for a change point (its default).
MAX_PVALUE = 0.001
#: Otava's window, in runs (its default).
WINDOW_RUNS = 50
#: A worsening change point this close to the newest run (it started within the last N runs, the
#: newest among them) still fails the gate: the newest run "continues" it.
RECENT_RUNS = 3
#: Fewer points than this and no shift can be told from noise.
MIN_POINTS = 4


@dataclass
class ChangePoint:
    """One shift in one check's series."""

    check: str
    level: LevelKey | None  # the level's key (level_keys): users, or a rate's req/s or speedup
    index: int  # the run (0 = oldest of the series) that introduced it
    run: str  # that run's folder
    started: str  # that run's start, UTC
    before: float
    after: float
    change: float  # relative (absolute for the error rate)
    relative: bool
    pvalue: float
    worse: bool
    newest: bool = False  # the newest run starts or continues it
    unit: str = USERS  # what ``level`` counts: users, req/s or × (the name says it)

    @property
    def name(self) -> str:
        return self.check if self.level is None else f"{self.check} @ {load_text(self.level, self.unit)}"

    def text(self) -> str:
        unit = "%" if self.relative else " pp"
        direction = "worse" if self.worse else "better"
        return (f"{self.name}: a shift of {self.change * 100:+.1f}{unit} ({direction}) from {self.before:.4g} to "
                f"{self.after:.4g}, introduced by {self.run} ({self.started}), p = {self.pvalue:.2g}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["unit"]  # the name says it, and history --json's load_mode
        out["name"] = self.name
        return out


def find_shifts(values: Sequence[float | None], max_pvalue: float = MAX_PVALUE) -> list[tuple[int, float, float, float]]:
    """(index, mean before, mean after, p-value) of every change point in ``values`` (None/NaN skipped).

    ``index`` is in ``values``' own positions: the first point after the shift.
    """
    # Otava (and its numpy/scipy stack): only when a history has enough runs to look for shifts
    from otava.analysis import compute_change_points

    kept = [i for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if len(kept) < MIN_POINTS:
        return []
    series = [float(values[i]) for i in kept]  # type: ignore[arg-type]
    found, _weak = compute_change_points(series, window_len=WINDOW_RUNS, max_pvalue=max_pvalue)
    out = []
    for cp in found:
        idx = int(cp.index)
        if 0 < idx < len(series):
            out.append((kept[idx], float(cp.stats.mean_1), float(cp.stats.mean_2), float(cp.stats.pvalue)))
    return out


def series_change_points(
    check: str,
    level: LevelKey | None,
    values: Sequence[float | None],
    runs: Sequence[tuple[str, str]],
    *,
    higher_is_worse: bool,
    relative: bool = True,
    max_pvalue: float = MAX_PVALUE,
    unit: str = USERS,
) -> list[ChangePoint]:
    """The change points of one series; ``runs`` gives each point's (folder, start time)."""
    out = []
    for idx, before, after, p in find_shifts(values, max_pvalue):
        if relative:
            change = after / before - 1.0 if before else (math.inf if after > 0 else 0.0)
        else:
            change = after - before
        worse = change > 0 if higher_is_worse else change < 0
        out.append(ChangePoint(check, level, idx, runs[idx][0], runs[idx][1], before, after, change, relative,
                               p, worse, unit=unit))
    return out


def mark_newest(points: list[ChangePoint], n_runs: int, recent: int = RECENT_RUNS) -> list[ChangePoint]:
    """Flag, per series, the last change point when the newest run starts or continues it."""
    last: dict[tuple[str, LevelKey | None], ChangePoint] = {}
    for cp in points:
        key = (cp.check, cp.level)
        if key not in last or cp.index > last[key].index:
            last[key] = cp
    for cp in last.values():
        cp.newest = cp.index >= n_runs - recent
    return points


def gate_failures(points: Sequence[ChangePoint], tolerance_for: Callable[[str], float]) -> list[ChangePoint]:
    """The change points that fail the gate: newest, worse, and beyond the check's tolerance."""
    return [cp for cp in points if cp.newest and cp.worse and abs(cp.change) > tolerance_for(cp.check)]


def level_value(summary: Mapping[str, Any], check: str, level: LevelKey) -> float | None:
    """A check's point value at one level of a summary (by its key, :mod:`level_keys`; None when not
    measured or not finite)."""
    for lv in summary.get("levels") or []:
        if level_key(lv) == level and lv.get("status") != "no_data":
            value = check_value(lv, check)
            return float(value) if math.isfinite(value) else None
    return None
