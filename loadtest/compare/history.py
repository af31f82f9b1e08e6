"""``loadtest history DIR…``: every run of one scenario over time, and where it regressed.

Run folders are found anywhere under the given folders (``reports/``); warm-up
runs are left out. Each run is compared with the previous run of the same
workload fingerprint by the same gate as ``loadtest compare --history`` (default
rules, the runs before it as its history), so "regressed" here means exactly
what it would have meant in CI. Change points over the series come from
:mod:`changepoints`. A run whose workload differs from the
previous one starts a new series ("workload changed") rather than being
compared.

The page shows capacity over time (each run's point with its certain bracket,
see :mod:`loadtest.compare.capacity`) and the SLO's percentiles at each fixed
level of the sweep over time, with their intervals (at each run's confidence); regressed runs
are marked. The table goes to the terminal (and ``--json``).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from loadtest.compare.capacity import CapacityBounds
from loadtest.compare.changepoints import ChangePoint, gate_failures, level_value, mark_newest, series_change_points
from loadtest.fingerprint import fingerprint_of_run
from loadtest.compare.groups import compare_groups
from loadtest.compare.inputs import RUN_JSON, SUMMARY_JSON, find_runs
from loadtest.compare.rules import ERROR_RATE, THROUGHPUT, Rules
from loadtest.errors import InputError, LoadtestError
from loadtest.paths import PathError, read_run_json, run_records
from loadtest.report.page import PAGE_STYLE as page_style
from loadtest.report.plotting import figure_html, summaries_ci_label

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
            out += series_change_points(check, level, values, where, higher_is_worse=check != THROUGHPUT,
                                        relative=check != ERROR_RATE)
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


def history_figure(runs: Sequence[HistoryRun], shifts: Sequence[ChangePoint] = ()) -> go.Figure:
    checks = key_checks(runs)
    levels = runs[-1].levels or sorted({lv["concurrency"] for lv in runs[-1].summary.get("levels") or []})
    bars = summaries_ci_label(r.summary for r in runs)  # each run's intervals: at the confidence it was judged at
    fig = make_subplots(rows=1 + len(checks), cols=1, shared_xaxes=True, vertical_spacing=min(0.06, 0.5 / (1 + len(checks))),
                        subplot_titles=["capacity (concurrent users; bar: certain bracket)"]
                        + [f"{c} at each level (ms; bars: {bars})" for c in checks])
    xs = [datetime.fromtimestamp(r.started_wall, tz=timezone.utc) for r in runs]
    caps = [r.capacity for r in runs]
    lows = [r.bounds.lower for r in runs]
    highs = [r.bounds.upper if math.isfinite(r.bounds.upper) else (r.bounds.max_tested or r.bounds.lower) for r in runs]
    fig.add_trace(go.Scatter(
        x=xs, y=caps, mode="lines+markers", name="capacity", line=dict(color="#1a7f37"),
        error_y=dict(type="data", symmetric=False,
                     array=[max(0, h - c) if c is not None else 0 for h, c in zip(highs, caps)],
                     arrayminus=[max(0, c - lo) if c is not None else 0 for lo, c in zip(lows, caps)]),
        text=[f"{r.folder.name}: {r.bounds.text()}; {r.versus_previous}" for r in runs], hoverinfo="text+y",
    ), row=1, col=1)
    _mark_regressed(fig, runs, xs, caps, row=1, legend=True)
    legend_shown = False
    for i, check in enumerate(checks, start=2):
        for level in levels:
            values = [value_at(r, check, level) for r in runs]
            ys = [v[0] for v in values]
            if all(y is None for y in ys):
                continue
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines+markers", name=f"{check} @ {level}", legendgroup=str(level),
                error_y=dict(type="data", symmetric=False,
                             array=[(v[2] - v[0]) if None not in v else 0 for v in values],
                             arrayminus=[(v[0] - v[1]) if None not in v else 0 for v in values]),
            ), row=i, col=1)
            _mark_regressed(fig, runs, xs, ys, row=i, legend=False)
            _mark_shifts(fig, runs, xs, ys, [cp for cp in shifts if cp.check == check and cp.level == level],
                         row=i, legend=not legend_shown)
            legend_shown = legend_shown or any(cp.check == check and cp.level == level for cp in shifts)
    fig.update_layout(height=300 * (1 + len(checks)) + 60, title="Over time")
    return fig


def _mark_regressed(fig: go.Figure, runs, xs, ys, *, row: int, legend: bool) -> None:
    marked = [(x, y) for r, x, y in zip(runs, xs, ys) if r.versus_previous == REGRESSED and y is not None]
    if marked:
        fig.add_trace(go.Scatter(
            x=[m[0] for m in marked], y=[m[1] for m in marked], mode="markers", name="regressed",
            legendgroup="regressed", showlegend=legend,
            marker=dict(symbol="x", size=14, color="#cf222e", line=dict(width=3)),
        ), row=row, col=1)


def _mark_shifts(fig: go.Figure, runs, xs, ys, shifts: Sequence[ChangePoint], *, row: int, legend: bool) -> None:
    """A change point: a diamond on the run that introduced it, and a dotted line at the new level."""
    series = latest_series(runs)
    offset = len(runs) - len(series)  # the series is the tail of the runs
    for cp in shifts:
        at = offset + cp.index
        if ys[at] is None:
            continue
        color = "#cf222e" if cp.worse else "#1a7f37"
        fig.add_trace(go.Scatter(
            x=[xs[at]], y=[ys[at]], mode="markers+text", name="change point", legendgroup="change point",
            showlegend=legend, text=[f"{cp.change * 100:+.0f}%"], textposition="top center",
            marker=dict(symbol="diamond-open", size=18, color=color, line=dict(width=3)),
            hovertext=[cp.text()], hoverinfo="text",
        ), row=row, col=1)
        fig.add_trace(go.Scatter(
            x=xs[at:], y=[cp.after] * len(xs[at:]), mode="lines", showlegend=False, hoverinfo="skip",
            line=dict(color=color, dash="dot", width=1),
        ), row=row, col=1)
        legend = False


# -- outputs ---------------------------------------------------------------------------------


def table_rows(runs: Sequence[HistoryRun]) -> list[dict[str, Any]]:
    checks = key_checks(runs)
    ref = _reference_level(runs)
    rows = []
    for r in runs:
        row: dict[str, Any] = {
            "started": r.when,
            "run": str(r.folder),
            "capacity": r.capacity,
            "bracket": r.bounds.text(),
            "verdict": (r.summary.get("capacity") or {}).get("verdict"),
            "vs_previous": r.versus_previous,
            "fingerprint": r.fingerprint,
        }
        for check in checks if ref is not None else ():  # no level every run measured: nothing to quote
            row[f"{check}@{ref}"] = value_at(r, check, ref)[0]
        rows.append(row)
    return rows


def _reference_level(runs: Sequence[HistoryRun]) -> int | None:
    """The level the table quotes percentiles at: the highest one every run measured."""
    common: set[int] | None = None
    for r in runs:
        here = {lv["concurrency"] for lv in r.summary.get("levels") or [] if lv.get("status") != "no_data"}
        common = here if common is None else common & here
    return max(common) if common else None


def print_table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    keys = [k for k in rows[0] if k not in ("run", "fingerprint")] + ["run"]
    text = [[_cell(row.get(k), k) for k in keys] for row in rows]
    widths = [max(len(k), *(len(t[i]) for t in text)) for i, k in enumerate(keys)]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths)))
    for t in text:
        print("  ".join(v.ljust(w) for v, w in zip(t, widths)))


def _cell(value: Any, key: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    if key == "run":
        return Path(str(value)).name
    return str(value)


def render_history_html(runs: Sequence[HistoryRun], shifts: Sequence[ChangePoint] = ()) -> str:
    # stdlib html, imported here: `html` is also run_history's parameter (the page's path)
    import html

    rows = table_rows(runs)
    head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0])
    body = "".join(
        "<tr" + (" style='color:#cf222e;font-weight:600'" if r["vs_previous"] == REGRESSED else "") + ">"
        + "".join(f"<td>{html.escape(_cell(v, k))}</td>" for k, v in r.items()) + "</tr>"
        for r in rows
    )
    name = html.escape(runs[-1].name)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{name}: history</title><style>{page_style}</style>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        f"<h1>{name}: {len(runs)} runs over time</h1>"
        "<p class='dim'>Each run is compared with the previous run of the same workload by the regression gate "
        "(default rules); red × marks the runs that regressed; a diamond marks a change point (Apache Otava) "
        "on the run that introduced it, red when worse, with the new level dotted.</p>"
        + figure_html(history_figure(runs, shifts))
        + _shifts_html(shifts)
        + f"<h2>Runs</h2><table class='grid'><tr>{head}</tr>{body}</table></body></html>\n"
    )


def _shifts_html(shifts: Sequence[ChangePoint]) -> str:
    # stdlib html, imported here: `html` is also run_history's parameter (the page's path)
    import html

    if not shifts:
        return "<h2>Change points</h2><p class='dim'>None: no check's series shifted.</p>"
    red = " style='color:#cf222e;font-weight:600'"
    items = "".join(
        f"<li{red if cp.worse and cp.newest else ''}>"
        f"{html.escape(cp.text())}{' (the newest run is in it)' if cp.newest else ''}</li>" for cp in shifts
    )
    return f"<h2>Change points</h2><ul>{items}</ul>"


def run_history(dirs: Sequence[Path], *, scenario: str | None, html: Path, json_path: Path | None,
                fail_on_change_point: bool = False, rules: Rules | None = None) -> int:
    """The ``loadtest history`` command: print the table and change points, write the page (and JSON).

    Exit 1 with ``fail_on_change_point`` when the newest run starts or continues a worsening shift
    beyond the tolerance (:func:`changepoints.gate_failures`)."""
    # the writers: only for the `history` command, not for the page's renderers that compare uses
    from loadtest.compare.outputs import write_text
    from loadtest.paths import output_file

    output_file(html, "--html")
    if json_path is not None:
        output_file(json_path, "--json")
    runs = load_history(dirs, scenario)
    rows = table_rows(runs)
    shifts = change_points(runs)
    failing = gate_failures(shifts, (rules or Rules()).tolerance_for)
    print_table(rows)
    for r in (r for r in runs if r.versus_previous == "error"):  # the table's "error" says no more than that
        print(f"  {r.folder.name}: not compared with the previous run: {r.detail}")
    for cp in shifts:
        mark = "FAIL" if cp in failing else ("NEW " if cp.newest else "    ")
        print(f"  {mark} change point: {cp.text()}")
    print(f"wrote {write_text(html, render_history_html(runs, shifts))}")
    if json_path is not None:
        doc = {"scenario": runs[-1].name, "runs": rows, "change_points": [cp.to_dict() for cp in shifts]}
        print(f"wrote {write_text(json_path, json.dumps(doc, indent=2) + chr(10))}")
    if fail_on_change_point and failing:
        print(f"CHANGE POINT: the newest run starts or continues a worsening shift: {failing[0].text()}")
        return 1
    return 0
