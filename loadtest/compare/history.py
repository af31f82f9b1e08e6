"""``loadtest history DIR…``: every run of one scenario over time, and where it regressed.

Run folders are found anywhere under the given folders (``reports/``); warm-up
runs are left out. Each run is compared with the previous run of the same
workload fingerprint by the same gate as ``loadtest compare --history`` (default
rules, the runs before it as its history), so "regressed" here means exactly
what it would have meant in CI. Change points over the series come from
:mod:`changepoints`. A run whose workload differs from the
previous one starts a new series ("workload changed") rather than being
compared.

The page, the table and the command itself are :mod:`history_page`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from loadtest.compare.capacity import CapacityBounds
from loadtest.compare.change import worse_sign
from loadtest.compare.changepoints import ChangePoint, level_value, mark_newest, series_change_points
from loadtest.fingerprint import fingerprint_of_run
from loadtest.compare.groups import compare_groups
from loadtest.compare.inputs import RUN_JSON, SUMMARY_JSON, find_runs, load_mode_of
from loadtest.compare.rules import ABSOLUTE, ERROR_RATE, THROUGHPUT, Rules, check_kind
from loadtest.errors import InputError, LoadtestError
from loadtest.paths import PathError, read_run_json, run_records
from loadtest.run_record import RATE_MODE_WORDS

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
    levels: list[int] = field(default_factory=list)

    @property
    def capacity(self) -> int | None:
        value = (self.summary.get("capacity") or {}).get("concurrency")
        return int(value) if isinstance(value, (int, float)) else None

    @property
    def when(self) -> str:
        return datetime.fromtimestamp(self.started_wall, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def load_history(dirs: Sequence[Path], scenario: str | None = None) -> list[HistoryRun]:
    """The runs of one scenario, oldest first, each judged against the previous comparable one."""
    skipped: list[str] = []
    runs = [r for r in (_read(folder, skipped) for folder in find_runs(dirs)) if r is not None]
    names = sorted({r.name for r in runs})
    if not runs:
        why = f" ({len(skipped)} skipped; {skipped[0]})" if skipped else ""
        raise InputError(f"DIR {', '.join(str(d) for d in dirs)}: no run folders (with {RUN_JSON}) under it{why}")
    for line in skipped:  # a damaged, half-written or newer-format folder is skipped, not fatal: one line each
        print(f"loadtest history: {line}", file=sys.stderr)
    if scenario is None and len(names) > 1:
        raise InputError(f"runs of several scenarios were found ({', '.join(names)}): choose one with --scenario")
    chosen = scenario or names[0]
    runs = sorted((r for r in runs if r.name == chosen), key=lambda r: r.started_wall)
    if not runs:
        raise InputError(f"--scenario {chosen}: no run of that scenario (found {', '.join(names)})")
    _judge_in_order(runs)
    return runs


def _read(folder: Path, skipped: list[str]) -> HistoryRun | None:
    try:
        run = read_run_json(folder, "skipped")
    except PathError as err:
        skipped.append(str(err))
        return None
    if run.get("warmup_run"):
        return None  # a warm-up run (run --warmup-run) is not part of the series
    if run.get("stopped_by") == "preflight":  # no load was sent: nothing in the series, but say so
        skipped.append(f"skipped {folder}: the run stopped at its preflight ({run.get('stop_error') or 'no reason kept'}); "
                       "no load was sent")
        return None
    mode = load_mode_of(run, None)  # read_run_json fills it in
    if mode in RATE_MODE_WORDS:  # levels by concurrent users: an open loop's would all be "0 users"
        skipped.append(f"skipped {folder}: {RATE_MODE_WORDS[mode]}; history compares closed-loop runs only, so far")
        return None
    summary = _summary(folder, run, skipped)
    if summary is None:
        return None
    started = run.get("started_wall") or (summary.get("run") or {}).get("started_wall")
    if started is None:
        skipped.append(f"skipped {folder}: its run.json and summary.json say nothing of when it started")
        return None
    fp = fingerprint_of_run(run, summary)
    return HistoryRun(
        folder=folder,
        name=str(run.get("name") or summary.get("name") or ""),
        started_wall=float(started),
        fingerprint=str(fp.get("hash")),
        summary=summary,
        bounds=CapacityBounds.from_levels(summary.get("levels") or []),
        levels=list(fp.get("levels") or []),
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
        skipped.append(f"skipped {folder}: no readable {SUMMARY_JSON}, and its records could not be analyzed ({why})")
        return None


def _judge_in_order(runs: list[HistoryRun]) -> None:
    """Each run against the previous one of its fingerprint, with the runs before that as its
    history (their run-to-run noise, see :mod:`groups`), as a nightly ``compare --history`` would."""
    previous: dict[str, HistoryRun] = {}
    earlier: dict[str, list[Path]] = {}
    last_fp: str | None = None
    for run in runs:
        before = previous.get(run.fingerprint)
        if before is None:
            run.versus_previous = "first" if last_fp is None else "workload changed"
        else:
            try:
                cmp = compare_groups([before.folder], [run.folder], Rules(), history=earlier.get(run.fingerprint, []))
                run.versus_previous = cmp.outcome
                run.detail = cmp.headline
            except LoadtestError as err:
                run.versus_previous, run.detail = "error", str(err)
        previous[run.fingerprint] = run
        earlier.setdefault(run.fingerprint, []).append(run.folder)
        last_fp = run.fingerprint


# -- change points ---------------------------------------------------------------------------


def latest_series(runs: Sequence[HistoryRun]) -> list[HistoryRun]:
    """The runs of the newest run's workload fingerprint (a changed workload starts a new series)."""
    return [r for r in runs if r.fingerprint == runs[-1].fingerprint] if runs else []


def change_points(runs: Sequence[HistoryRun]) -> list[ChangePoint]:
    """Every check's change points over the latest series (see :mod:`changepoints`), newest flagged."""
    series = latest_series(runs)
    levels = series[-1].levels or sorted({lv["concurrency"] for lv in series[-1].summary.get("levels") or []})
    where = [(r.folder.name, r.when) for r in series]
    out: list[ChangePoint] = []
    for check in key_checks(series) + [THROUGHPUT, ERROR_RATE]:
        for level in levels:
            values = [level_value(r.summary, check, level) for r in series]
            kind = check_kind(check)
            out += series_change_points(check, level, values, where, higher_is_worse=worse_sign(kind) > 0,
                                        relative=kind not in ABSOLUTE)
    return mark_newest(out, len(series))


# -- what is plotted -------------------------------------------------------------------------


def key_checks(runs: Sequence[HistoryRun]) -> list[str]:
    """The latest run's SLO percentiles (e.g. ``itl_ms.p95``)."""
    slo = runs[-1].summary.get("slo") or {}
    return [f"{metric}.{pct}" for metric, pcts in slo.items() if isinstance(pcts, dict) for pct in pcts]


def value_at(run: HistoryRun, check: str, level: int) -> tuple[float | None, float | None, float | None]:
    metric, _, pct = check.partition(".")
    for lv in run.summary.get("levels") or []:
        if lv.get("concurrency") == level and lv.get("status") != "no_data":
            stats = lv.get(metric) or {}
            ci = (stats.get("ci") or {}).get(pct) or [None, None]
            return stats.get(pct), ci[0], ci[1]
    return None, None, None
