"""``loadtest run --repeat K [--warmup-run]``: one job, several runs of the scenario, each in its own folder.

One run says little about a server that moves from run to run; K runs of the
same scenario let ``compare`` gate on the difference between groups (see
:mod:`loadtest.compare.groups`). A *warm-up run* first (on by default for gate
runs, ``--baseline``) takes the first-run effects (a cold cache, lazy
compilation, a CPU still at low frequency) out of the measured ones; it is a
full run, kept in its own folder and marked ``"warmup_run": true`` in run.json
so that ``compare --history`` and ``history`` never count it.

Folders, from ``--out DIR`` (or the default ``reports/<name>-<stamp>``):

* one run, no warm-up: ``DIR`` itself, as before;
* one run after a warm-up: ``DIR`` for the run, ``DIR-warmup`` for the warm-up;
* K > 1 runs: ``DIR/warmup`` (if any) and ``DIR/run-01`` … ``DIR/run-K``; the
  comparison's outputs go to ``DIR``.

Such a ``DIR`` (a *repeat folder*) is not a run folder: :func:`group_runs` finds
its runs by these names, so that ``baseline exists`` and the commands that read
one run can say what the folder is, and ``baseline promote DIR`` promotes the run
that stands for the group (:func:`representative`).

**Which run stands for a group.** A baseline is one run: ``baseline exists``,
``run --baseline``, ``analyze`` and ``history``'s copies each read one run folder,
and ``baseline promote`` of a repeat folder failed ("not a run folder"), so the
nightly CronJob with ``--repeat`` exited 5 on every passing night and never made a
first baseline. The run promoted is the one the gate itself would take for the
group. The gate takes a group's capacity from its median run
(``loadtest.compare.groups._group_capacity``: ``median_low`` of the runs'
capacities) and each level check from the centre of its runs' values; so the
representative is a run whose capacity is the group's, and among those the one
whose values lie nearest the group's medians: for every SLO percentile, each SLO
metric's median (the gate judges both once it has a history) and output tokens/s,
at every level every run measured, the distance of the run's log value from the
median of the group's log values, summed. With two runs both lie equally near
(the median is their midpoint), and the first is taken.

Why not keep the whole group as the baseline: with enough reference runs
(``--min-history``) the gate judges a night against the mean of the reference
runs, not against the baseline, and the nightly layout's ``--history`` (the
results prefix) holds every run of the promoted night anyway, each counted once
(the baseline is a copy of one of them). One run keeps every reader of a
baseline as it is. (Not in :mod:`loadtest.compare`: ``storage/`` calls this, and
``compare/`` imports ``storage/``.)
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from loadtest.errors import InputError
from loadtest.run_files import RUN_JSON

#: An upper bound: a job is bounded in time, and a typo (``--repeat 100``) must not keep a server busy for days.
MAX_REPEAT = 50


@dataclass(frozen=True)
class PlannedRun:
    folder: Path
    warmup: bool


def plan(out: Path, repeat: int, warmup: bool) -> tuple[list[PlannedRun], Path]:
    """The runs to make, in order, and the folder the comparison's outputs go to."""
    if not 1 <= repeat <= MAX_REPEAT:
        raise InputError(f"--repeat {repeat}: expected 1 to {MAX_REPEAT} runs")
    if repeat == 1:
        runs = [PlannedRun(out.with_name(out.name + "-warmup"), True)] if warmup else []
        return runs + [PlannedRun(out, False)], out
    if out.exists() and any(out.iterdir()):
        raise InputError(f"--out {out}: the folder exists and is not empty; choose another")
    width = max(2, len(str(repeat)))
    runs = [PlannedRun(out / "warmup", True)] if warmup else []
    runs += [PlannedRun(out / f"{RUN_PREFIX}{i:0{width}d}", False) for i in range(1, repeat + 1)]
    return runs, out


#: A measured run's folder in a repeat folder: ``run-01`` … (the warm-up's is ``warmup``).
RUN_PREFIX = "run-"
_RUN_NAME = re.compile(rf"{RUN_PREFIX}\d{{2,}}")


def group_runs(files: Iterable[str]) -> list[str]:
    """The measured runs of a repeat folder, in order (``["run-01", "run-02"]``), from the paths of
    its files relative to it; ``[]`` for any other folder (one run, or a folder of nights).

    A run counts when its ``run.json`` is there: ``run-01/run.json``, not ``warmup/run.json``."""
    names = {rel.split("/")[0] for rel in files if rel.count("/") == 1 and rel.endswith("/" + RUN_JSON)}
    return sorted((n for n in names if _RUN_NAME.fullmatch(n)), key=lambda n: int(n[len(RUN_PREFIX):]))


def group_runs_in(folder: Path) -> list[str]:
    """:func:`group_runs` of a local folder (``[]`` when it is none)."""
    try:
        return group_runs(f"{p.parent.name}/{RUN_JSON}" for p in folder.glob(f"{RUN_PREFIX}*/{RUN_JSON}"))
    except OSError:
        return []


def warmup_default(explicit: bool | None, gated: bool, web: bool) -> bool:
    """``--warmup-run`` as given, else on for gate runs (not with the web UI, which waits for a click)."""
    if explicit is not None:
        return explicit
    return gated and not web


# -- the run that stands for a group -----------------------------------------------------------

#: What a summary's capacity is counted in, by mode: users (closed loop), req/s (open loop), × (trace speedup).
_CAPACITY_KEYS = (("concurrency", " users"), ("rate_rps", " req/s"), ("speedup", "×"))
#: Output tokens/s: the throughput check (:data:`loadtest.compare.rules.THROUGHPUT`).
_THROUGHPUT = "output_tokens_per_s"


@dataclass(frozen=True)
class Representative:
    """The run of a group that stands for it: its index among the runs given, and why it."""

    index: int
    #: Why this run, in words that follow "the group's median run" (one clause, no full stop).
    why: str


def representative(summaries: Sequence[Mapping[str, Any]], names: Sequence[str]) -> Representative:
    """The run of a group (its ``summary.json`` each, in run order) that stands for it; ``names`` name them.

    Only numbers are read: a value a run lacks (missing, or ``null`` where failures reached the
    percentile) is left out of the distances, for every run alike."""
    if not summaries:
        raise ValueError("a group of no runs")
    caps = [_capacity(s) for s in summaries]
    known = [c for c in caps if c is not None]
    chosen = list(range(len(summaries)))
    words = []
    if known:
        median = statistics.median_low([c[0] for c in known])
        chosen = [i for i, c in enumerate(caps) if c is not None and c[0] == median]
        unit = next(c[1] for c in known if c[0] == median)
        words.append(f"its capacity, {median:g}{unit}, is the group's median, which the gate takes for the group's")
    else:
        words.append("no run of it has a capacity")
    distances, values = _distances(summaries)
    best = min(distances[i] for i in chosen)
    nearest = [i for i in chosen if distances[i] <= best + 1e-9 * max(1.0, best)]
    if not values:
        words.append("no value every run measured to tell them apart: the first")
    elif len(nearest) > 1:
        words.append(f"{' and '.join(names[i] for i in nearest)} lie equally near the group's medians of the "
                     "SLO percentiles and throughput: the first")
    elif len(chosen) > 1:
        words.append("its SLO percentiles and throughput lie nearest the group's medians")
    return Representative(nearest[0], "; ".join(words))


def _capacity(summary: Mapping[str, Any]) -> tuple[float, str] | None:
    capacity = summary.get("capacity") or {}
    for key, unit in _CAPACITY_KEYS:
        value = _num(capacity.get(key))
        if math.isfinite(value):
            return value, unit
    return None


def _levels(summary: Mapping[str, Any]) -> dict[tuple, Mapping[str, Any]]:
    """Each measured level by its load (users, rate or speedup); a level that ran twice: the larger, as the gate."""
    out: dict[tuple, Mapping[str, Any]] = {}
    for lv in summary.get("levels") or []:
        if not isinstance(lv, Mapping) or lv.get("status") == "no_data":
            continue
        key = tuple(lv.get(k) for k in ("concurrency", "rate_rps", "speedup"))
        if key not in out or _num(lv.get("requests")) > _num(out[key].get("requests")):
            out[key] = lv
    return out


def _checks(summaries: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(metric, percentile) of every SLO percentile and each SLO metric's median, over the group's SLOs."""
    out: list[tuple[str, str]] = []
    for s in summaries:
        for metric, pcts in (s.get("slo") or {}).items():
            if isinstance(pcts, Mapping):
                for pct in [*pcts, "p50"]:
                    if (metric, pct) not in out:
                        out.append((metric, pct))
    return out


def _distances(summaries: Sequence[Mapping[str, Any]]) -> tuple[list[float], int]:
    """Each run's summed distance from the group's medians (log values), and how many values were compared."""
    levels = [_levels(s) for s in summaries]
    common = set(levels[0]).intersection(*levels[1:])
    checks = _checks(summaries)
    distances = [0.0] * len(summaries)
    compared = 0
    for key in sorted(common, key=repr):  # a fixed order: the sums, and so a tie, do not depend on a set's
        for metric, pct in [*checks, (_THROUGHPUT, "")]:
            values = [_num(lv[key].get(metric) if not pct else (lv[key].get(metric) or {}).get(pct)) for lv in levels]
            if not all(math.isfinite(v) and v > 0 for v in values):
                continue  # a value some run lacks, or one reached by failures: not a distance
            logs = [math.log(v) for v in values]
            centre = statistics.median(logs)
            distances = [d + abs(x - centre) for d, x in zip(distances, logs)]
            compared += 1
    return distances, compared


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
