"""``loadtest history DIR…``: every run of one scenario over time, and where it regressed.

Run folders are found anywhere under the given folders (``reports/``); warm-up
runs are left out. Each run is compared with the previous run of the same
workload fingerprint by the same gate as ``loadtest compare --history`` (default
rules, the runs before it as its history), so "regressed" here means exactly
what it would have meant in CI: with enough runs before it, against their mean and
run-to-run noise, not against the previous run (the table says "vs reference";
history.json keeps the key ``vs_previous``). Change points over the series come from
:mod:`changepoints`. A run whose workload differs from the
previous one starts a new series ("workload changed") rather than being
compared. A run found in several folders (a nightly's baseline is a copy of a night; see
:func:`one_row_per_run`) is one row, named by as much of its path as tells it from the others.
A rate run (open loop, trace replay) is listed by its rates (speedups) and its capacity in req/s
(×), as the gate compares it (:mod:`level_keys`).

The page, the table and the command itself are :mod:`history_page`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from loadtest.analysis.stop import no_load
from loadtest.compare.capacity import CapacityBounds
from loadtest.compare.change import worse_sign
from loadtest.compare.changepoints import ChangePoint, level_value, mark_newest, series_change_points
from loadtest.fingerprint import fingerprint_of_run
from loadtest.compare.groups import compare_groups
from loadtest.compare.inputs import RUN_JSON, SUMMARY_JSON, RunIdentity, find_runs, load_mode_of, run_identity, run_name
from loadtest.compare.level_keys import CAPACITY_KEY, UNIT_OF_MODE, USERS, LevelKey, level_key
from loadtest.compare.rules import ABSOLUTE, COMPLETED_SHARE, ERROR_RATE, THROUGHPUT, Rules, check_kind
from loadtest.errors import InputError, LoadtestError
from loadtest.paths import PathError, read_run_json, run_records
from loadtest.run_files import REPORT_HTML
from loadtest.staged_paths import shown

REGRESSED = "regression"


@dataclass
class HistoryRun:
    folder: Path
    name: str
    started_wall: float
    fingerprint: str
    summary: dict[str, Any]
    bounds: CapacityBounds
    versus_previous: str = "first"  # first | pass | regression | inconclusive | workload changed | error
    detail: str = ""
    levels: list[LevelKey] = field(default_factory=list)
    #: What the table and the page call it: the folder's name, or more of its path where another
    #: row's folder has the same name (:func:`distinct_labels`).
    label: str = ""
    #: Which run this is, whichever folder holds it (:func:`run_identity`); None: never taken for another.
    identity: RunIdentity | None = None
    #: What its levels count (:mod:`level_keys`): users, or a rate run's req/s or ×.
    unit: str = USERS

    def __post_init__(self) -> None:
        self.label = self.label or self.folder.name

    @property
    def capacity(self) -> LevelKey | None:
        """``capacity.concurrency``; a rate run's ``capacity.rate_rps`` (``capacity.speedup``)."""
        value = (self.summary.get("capacity") or {}).get(CAPACITY_KEY[self.unit])
        if not isinstance(value, (int, float)):
            return None
        return int(value) if self.unit == USERS else float(value)

    @property
    def when(self) -> str:
        return datetime.fromtimestamp(self.started_wall, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def load_history(dirs: Sequence[Path], scenario: str | None = None) -> list[HistoryRun]:
    """The runs of one scenario, oldest first, each judged against the previous comparable one."""
    skipped: list[str] = []
    runs = [r for r in (_read(folder, skipped) for folder in find_runs(dirs)) if r is not None]
    runs, copies = one_row_per_run(runs)
    names = sorted({r.name for r in runs})
    if not runs:
        why = f" ({len(skipped)} skipped; {skipped[0]})" if skipped else ""
        raise InputError(f"DIR {', '.join(str(d) for d in dirs)}: no run folders (with {RUN_JSON}) under it{why}")
    for line in skipped:  # a damaged, half-written or newer-format folder is skipped, not fatal: one line each
        print(f"loadtest history: {line}", file=sys.stderr)
    for copy, kept in copies:
        print(f"loadtest history: {shown(copy.folder)}: the same run as {shown(kept.folder)} "
              "(a copy: the same name and started_wall), listed once", file=sys.stderr)
    if scenario is None and len(names) > 1:
        raise InputError(f"runs of several scenarios were found ({', '.join(names)}): choose one with --scenario")
    chosen = scenario or names[0]
    runs = sorted((r for r in runs if r.name == chosen), key=lambda r: r.started_wall)
    if not runs:
        raise InputError(f"--scenario {chosen}: no run of that scenario (found {', '.join(names)})")
    for run, label in zip(runs, distinct_labels([r.folder for r in runs])):
        run.label = label
    _judge_in_order(runs)
    return runs


def one_row_per_run(runs: Sequence[HistoryRun]) -> tuple[list[HistoryRun], list[tuple[HistoryRun, HistoryRun]]]:
    """One row per run, not per folder holding it, and each copy left out with the row it is: (runs, [(copy, kept)]).

    Why: in the nightly layout the baseline folder is a copy of a night (``baseline promote``
    copies run.json byte for byte), so a history over the results held that night twice, and
    judged the second against the first, itself ("pass"). The run's identity is the gate's own
    (:func:`run_identity`: its scenario and its start, to the microsecond), so ``history`` and
    ``compare --history`` count the same runs.

    Which copy is kept: the run's own folder, not a baseline promoted from it, so the row keeps
    the name the run was made under (``nightly-…``, not ``baseline``). A promote copies run.json,
    summary.json and the Parquet files only, so the copy holding the report ``loadtest run``
    wrote (report.html) is the run's own. Among copies alike (plain copies, or a baseline
    analyzed again), the first by path, so the row never depends on the order a disk lists folders.
    """
    copies: dict[object, list[HistoryRun]] = {}
    for run in runs:
        copies.setdefault(run.identity or id(run), []).append(run)
    kept: list[HistoryRun] = []
    left_out: list[tuple[HistoryRun, HistoryRun]] = []
    for same in copies.values():
        if len(same) > 1:
            same = sorted(same, key=lambda r: (not (r.folder / REPORT_HTML).is_file(), str(r.folder)))
            left_out += [(copy, same[0]) for copy in same[1:]]
        kept.append(same[0])
    return kept, left_out


def distinct_labels(folders: Sequence[Path]) -> list[str]:
    """Each folder's name, or as many of its last path parts as tell it from every other folder's.

    Why: the table named a run by its folder's name alone, so two distinct runs in folders of one
    name (``qs_b1`` and ``hist2/qs_b1``) read as one run listed twice. They now read
    ``nightly/qs_b1`` and ``hist2/qs_b1``; a name no other row has stays as it was.
    """
    parts = [folder.parts for folder in folders]
    labels = []
    for i, mine in enumerate(parts):
        k = 1
        while k < len(mine) and any(other[-k:] == mine[-k:] for j, other in enumerate(parts) if j != i):
            k += 1
        labels.append(str(Path(*mine[-k:])))
    return labels


def _read(folder: Path, skipped: list[str]) -> HistoryRun | None:
    try:
        run = read_run_json(folder, "skipped")
    except PathError as err:
        skipped.append(str(err))
        return None
    if run.get("warmup_run"):
        return None  # a warm-up run (run --warmup-run) is not part of the series
    if (why := no_load(run)) is not None:  # nothing in the series, but say so
        skipped.append(f"skipped {shown(folder)}: {why}")
        return None
    summary = _summary(folder, run, skipped)
    if summary is None:
        return None
    identity = run_identity(run, summary)  # (name, start): None when nothing says when it started
    if identity is None:
        skipped.append(f"skipped {shown(folder)}: its run.json and summary.json say nothing of when it started")
        return None
    fp = fingerprint_of_run(run, summary)
    return HistoryRun(
        folder=folder,
        name=run_name(run, summary),
        started_wall=identity[1],
        fingerprint=str(fp.get("hash")),
        summary=summary,
        bounds=CapacityBounds.from_levels(summary.get("levels") or []),
        levels=list(fp.get("levels") or []),  # a closed loop's sweep; a rate run's levels come from its summary
        identity=identity,
        unit=UNIT_OF_MODE[load_mode_of(run, summary)],
    )


def _summary(folder: Path, run: dict[str, Any], skipped: list[str]) -> dict[str, Any] | None:
    path = folder / SUMMARY_JSON
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            pass
    try:  # no summary yet (an interrupted run): analyze its records, if it has any (as analyze requires)
        run_records(folder, "skipped")
    except PathError as err:
        skipped.append(str(err))
        return None
    try:
        # the analysis stack: only for a run folder without a summary.json
        from loadtest.analysis import analyze_run
        from loadtest.report.summary import summary_dict

        return summary_dict(analyze_run(folder))
    except Exception as err:  # any folder the analysis cannot read is one line, never the end of the history
        why = " ".join(str(err).split()) or type(err).__name__
        skipped.append(f"skipped {shown(folder)}: no readable {SUMMARY_JSON}, and its records could not be analyzed ({why})")
        return None


#: The verdicts after which a nightly job makes the run its baseline (it promotes on exit 0 only), and
#: a series' first run: the reference of the runs after it.
MOVES_THE_REFERENCE = frozenset({"first", "workload changed", "pass"})


def _judge_in_order(runs: list[HistoryRun]) -> None:
    """Each run against its reference, with the runs before it as its history (their run-to-run
    noise, see :mod:`groups`), as a nightly ``compare --history`` would judge it: with enough of
    them the verdict is against their mean, so it is "vs reference", not "vs previous" (the JSON key
    keeps that name).

    As in the nightly job, the reference is the last run that passed (or began the series): a run
    judged a regression is not promoted, and it is left out of the later runs' history (the gate
    leaves out a run whose compare.json says so). Why: with the previous run as the reference and
    every run in the history, a second night as slow as a rejected one read "pass" against it, where
    the nightly job said "regression" both nights.
    """
    reference: dict[str, HistoryRun] = {}
    earlier: dict[str, list[Path]] = {}
    last_fp: str | None = None
    for run in runs:
        before = reference.get(run.fingerprint)
        if before is None:
            run.versus_previous = "first" if last_fp is None else "workload changed"
        else:
            try:
                cmp = compare_groups([before.folder], [run.folder], Rules(), history=earlier.get(run.fingerprint, []))
                run.versus_previous = cmp.outcome
                run.detail = cmp.headline
            except LoadtestError as err:
                run.versus_previous, run.detail = "error", str(err)
        if run.versus_previous in MOVES_THE_REFERENCE:
            reference[run.fingerprint] = run
        if run.versus_previous != REGRESSED:
            earlier.setdefault(run.fingerprint, []).append(run.folder)
        last_fp = run.fingerprint


# -- change points ---------------------------------------------------------------------------


def latest_series(runs: Sequence[HistoryRun]) -> list[HistoryRun]:
    """The runs of the newest run's workload fingerprint (a changed workload starts a new series)."""
    return [r for r in runs if r.fingerprint == runs[-1].fingerprint] if runs else []


def change_points(runs: Sequence[HistoryRun]) -> list[ChangePoint]:
    """Every check's change points over the latest series (see :mod:`changepoints`), newest flagged."""
    series = latest_series(runs)
    levels = sweep(series[-1])
    where = [(r.label, r.when) for r in series]
    unit = series[-1].unit
    out: list[ChangePoint] = []
    for check in key_checks(series) + [THROUGHPUT if unit == USERS else COMPLETED_SHARE, ERROR_RATE]:
        for level in levels:
            values = [level_value(r.summary, check, level) for r in series]
            kind = check_kind(check)
            out += series_change_points(check, level, values, where, higher_is_worse=worse_sign(kind) > 0,
                                        relative=kind not in ABSOLUTE, unit=unit)
    return mark_newest(out, len(series))


def sweep(run: HistoryRun) -> list[LevelKey]:
    """The levels of a run's sweep: its fingerprint's (a closed loop's), else every level its summary measured
    (by key: a rate run's rates or speedups, :mod:`level_keys`)."""
    keys = (level_key(lv) for lv in run.summary.get("levels") or [])
    return run.levels or sorted({k for k in keys if k is not None})


# -- what is plotted -------------------------------------------------------------------------


def key_checks(runs: Sequence[HistoryRun]) -> list[str]:
    """The latest run's SLO percentiles (e.g. ``itl_ms.p95``)."""
    slo = runs[-1].summary.get("slo") or {}
    return [f"{metric}.{pct}" for metric, pcts in slo.items() if isinstance(pcts, dict) for pct in pcts]


def value_at(run: HistoryRun, check: str, level: LevelKey) -> tuple[float | None, float | None, float | None]:
    metric, _, pct = check.partition(".")
    for lv in run.summary.get("levels") or []:
        if level_key(lv) == level and lv.get("status") != "no_data":
            stats = lv.get(metric) or {}
            ci = (stats.get("ci") or {}).get(pct) or [None, None]
            return stats.get(pct), ci[0], ci[1]
    return None, None, None
