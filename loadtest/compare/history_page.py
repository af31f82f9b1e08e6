"""``loadtest history``'s outputs: the page, the table, and the command that writes them.

The page shows capacity over time (each run's point with its certain bracket,
see :mod:`loadtest.compare.capacity`) and the SLO's percentiles at each fixed
level of the sweep over time, with their intervals (at each run's confidence); regressed runs
are marked, and each change point (:mod:`changepoints`) with its new level. The table goes to
the terminal (and ``--json``). The runs and their verdicts are :mod:`history`.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from loadtest.compare.changepoints import ChangePoint, gate_failures
from loadtest.compare.history import (REGRESSED, HistoryRun, change_points, distinct_labels, key_checks, latest_series,
                                      load_history, sweep, value_at)
from loadtest.compare.level_keys import AXIS_TITLE, MODE_OF_UNIT, USERS, LevelKey, level_key, load_text
from loadtest.compare.rules import Rules
from loadtest.report.page import PAGE_STYLE as page_style
from loadtest.report.plotting import figure_html, summaries_ci_label
from loadtest.staged_paths import shown
from loadtest.compare.noise import MIN_HISTORY_RUNS  # the legend's count


def history_figure(runs: Sequence[HistoryRun], shifts: Sequence[ChangePoint] = ()) -> go.Figure:
    checks = key_checks(runs)
    levels = sweep(runs[-1])
    unit = runs[-1].unit
    bars = summaries_ci_label(r.summary for r in runs)  # each run's intervals: at the confidence it was judged at
    fig = make_subplots(rows=1 + len(checks), cols=1, shared_xaxes=True, vertical_spacing=min(0.06, 0.5 / (1 + len(checks))),
                        subplot_titles=[f"capacity ({AXIS_TITLE[unit] if unit == USERS else unit}; bar: certain bracket)"]
                        + [f"{c} at each level (ms; bars: {bars})" for c in checks])
    xs = [datetime.fromtimestamp(r.started_wall, tz=timezone.utc) for r in runs]
    # a run of another load mode (an earlier series) counts its capacity in another unit: not on this axis
    caps = [r.capacity if r.unit == unit else None for r in runs]
    lows = [r.bounds.lower for r in runs]
    highs = [r.bounds.upper if math.isfinite(r.bounds.upper) else (r.bounds.max_tested or r.bounds.lower) for r in runs]
    fig.add_trace(go.Scatter(
        x=xs, y=caps, mode="lines+markers", name="capacity", line=dict(color="#1a7f37"),
        error_y=dict(type="data", symmetric=False,
                     array=[max(0, h - c) if c is not None else 0 for h, c in zip(highs, caps)],
                     arrayminus=[max(0, c - lo) if c is not None else 0 for lo, c in zip(lows, caps)]),
        text=[f"{r.label}: {r.bounds.text()}; vs reference: {r.versus_previous}" for r in runs], hoverinfo="text+y",
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
                x=xs, y=ys, mode="lines+markers", name=f"{check} @ {_at(level, unit)}", legendgroup=str(level),
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


def _at(level: LevelKey, unit: str) -> str:
    """A level as a column or a trace names it: ``4`` (users, as always), ``4 req/s``, ``1.5×``."""
    return str(level) if unit == USERS else load_text(level, unit)


def table_rows(runs: Sequence[HistoryRun]) -> list[dict[str, Any]]:
    """One row per run; a rate run's capacity is its rate (speedup), its bracket and columns say the unit."""
    checks = key_checks(runs)
    ref = _reference_level(runs)
    unit = runs[-1].unit if runs else USERS
    rows = []
    for r in runs:
        row: dict[str, Any] = {
            "started": r.when,
            "run": shown(r.folder),
            "capacity": r.capacity,
            "bracket": r.bounds.text_at_a_rate(),
            "verdict": (r.summary.get("capacity") or {}).get("verdict"),
            "vs_previous": r.versus_previous,
            "fingerprint": r.fingerprint,
        }
        for check in checks if ref is not None else ():  # no level every run measured: nothing to quote
            row[f"{check}@{_at(ref, unit)}"] = value_at(r, check, ref)[0]
        rows.append(row)
    return rows


def _reference_level(runs: Sequence[HistoryRun]) -> LevelKey | None:
    """The level the table quotes percentiles at: the highest one every run measured."""
    common: set[LevelKey] | None = None
    for r in runs:
        here = {level_key(lv) for lv in r.summary.get("levels") or [] if lv.get("status") != "no_data"} - {None}
        common = here if common is None else common & here
    return max(common) if common else None


#: What the table's verdict column is. Its history.json key stays ``vs_previous``, but it never
#: was a comparison with the previous row: each run is judged as the gate judges a night
#: (:func:`history._judge_in_order`), against the mean of the runs before it once there are enough,
#: so a trial read "regression" on run-02 of a slow night beside an identical run-01, and "pass"
#: on the night that recovered from it.
HEADERS = {"vs_previous": "vs reference"}
VS_REFERENCE = (f"vs reference: the gate's verdict (default rules) on each run against the runs of its workload "
                f"before it: with at least {MIN_HISTORY_RUNS} of them, against their mean and run-to-run noise "
                "(earlier runs that their own gate rejected left out), not against the previous row; with fewer, "
                "against the previous run")


def print_table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    rows = _shown(rows)
    keys = [k for k in rows[0] if k not in ("run", "fingerprint")] + ["run"]
    text = [[_cell(row.get(k)) for k in keys] for row in rows]
    heads = [HEADERS.get(k, k) for k in keys]
    widths = [max(len(h), *(len(t[i]) for t in text)) for i, h in enumerate(heads)]
    print("  ".join(h.ljust(w) for h, w in zip(heads, widths)))
    for t in text:
        print("  ".join(v.ljust(w) for v, w in zip(t, widths)))
    print(VS_REFERENCE)


def _shown(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as the terminal and the page show them: ``run`` the folder's name, or more of its path
    where another row's folder has the same name (:func:`distinct_labels`); the JSON keeps whole paths."""
    labels = distinct_labels([Path(str(row["run"])) for row in rows])
    return [{**row, "run": label} for row, label in zip(rows, labels)]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def render_history_html(runs: Sequence[HistoryRun], shifts: Sequence[ChangePoint] = ()) -> str:
    # stdlib html, imported here: `html` is also run_history's parameter (the page's path)
    import html

    rows = _shown(table_rows(runs))
    head = "".join(f"<th>{html.escape(HEADERS.get(k, k))}</th>" for k in rows[0])
    body = "".join(
        "<tr" + (" style='color:#cf222e;font-weight:600'" if r["vs_previous"] == REGRESSED else "") + ">"
        + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in r.values()) + "</tr>"
        for r in rows
    )
    name = html.escape(runs[-1].name)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{name}: history</title><style>{page_style}</style>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        f"<h1>{name}: {len(runs)} runs over time</h1>"
        f"<p class='dim'>{html.escape(VS_REFERENCE)}. Red × marks the runs that regressed; a diamond marks a "
        "change point (Apache Otava) "
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
        print(f"  {r.label}: not compared with the previous run: {r.detail}")
    for cp in shifts:
        mark = "FAIL" if cp in failing else ("NEW " if cp.newest else "    ")
        print(f"  {mark} change point: {cp.text()}")
    print(f"wrote {shown(write_text(html, render_history_html(runs, shifts)))}")
    if json_path is not None:
        doc = {"scenario": runs[-1].name, "runs": rows, "change_points": [cp.to_dict() for cp in shifts]}
        if runs[-1].unit != USERS:  # what a rate run's capacity and levels count (a closed loop's: users, as always)
            doc["load_mode"] = MODE_OF_UNIT[runs[-1].unit]
        print(f"wrote {shown(write_text(json_path, json.dumps(doc, indent=2) + chr(10)))}")
    if fail_on_change_point and failing:
        print(f"CHANGE POINT: the newest run starts or continues a worsening shift: {failing[0].text()}")
        return 1
    return 0
