"""Shared plotting helpers: every page's figures look and read alike.

``report.html``, its server view, ``compare.html``, the history page and the
profile page draw levels against load with the same axis (log, labelled at the
swept levels), the same capacity marks and the same colours. Those helpers
live here, public, so that no page reaches into another page's privates.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import plotly.graph_objects as go
import plotly.io as pio

from loadtest.analysis.capacity import ci_label
from loadtest.analysis.results import Analysis, LevelResult
from loadtest.analysis.verdict import verdict_confidence


VERDICT_COLOURS = {
    "found": "#1a7f37",
    "at_least": "#1a7f37",
    "below_minimum": "#cf222e",
    "uncertain": "#9a6700",
    "client_saturated": "#9a6700",
    "host_contended": "#9a6700",
    "no_data": "#6e7781",
}
STATUS_COLOURS = {"pass": "#1a7f37", "fail": "#cf222e", "uncertain": "#9a6700", "no_data": "#6e7781"}
PCT_COLOURS = {"p50": "#2f81f7", "p90": "#8250df", "p95": "#bf8700", "p99": "#cf222e"}
PLOT_CONFIG = {"displaylogo": False, "responsive": True}


def finite(values: Iterable[float]) -> list[float | None]:
    """Plotly-safe values: NaN/inf become gaps (None)."""
    return [float(v) if v is not None and math.isfinite(v) else None for v in values]


#: Labelled ticks closer than this share of the axis's log span would print on top of each other
#: (a label is ~30 px on a subplot ~500 px wide).
MIN_LABEL_GAP = 0.07


def summaries_ci_label(summaries: Iterable[Mapping[str, Any]]) -> str:
    """What the intervals read from these summaries are: ``97.5% CI`` (:func:`ci_label`).

    Each ``summary.json`` holds the confidence its run was judged at (``confidence``: 95%, or
    1 − 5%/K with K looks, see :mod:`loadtest.analysis.verdict`), read as the gate reads it; runs
    judged at different confidences are named each (``95% CI or 97.5% CI``), never one for all.
    """
    levels = sorted({verdict_confidence({"verdict_confidence": s.get("confidence")}) for s in summaries})
    return " or ".join(ci_label(c) for c in levels) or ci_label(verdict_confidence({}))


def load_words(levels: Sequence[LevelResult]) -> tuple[str, str, str]:
    """How the figures name the load of these levels: (axis title, unit after a value, noun).

    ``("concurrent users", "users", "concurrency")``, or in an open loop (and a trace replay),
    whose levels are rates, ``("offered rate (requests/s)", "req/s", "offered rate")``: an
    open-loop report's box plots and timeline read "concurrent users" over its rates.
    """
    if any(lv.rate_rps is not None for lv in levels):
        return "offered rate (requests/s)", "req/s", "offered rate"
    return "concurrent users", "users", "concurrency"


def concurrency_axis(levels: Sequence[LevelResult]) -> dict[str, Any]:
    """Log axis labelled at the swept levels when the sweep is geometric.

    Refine probes (20, 22, 23, 24 between 16 and 32) would print their labels
    on top of each other on a log axis: they get an unlabelled minor tick, and
    their value is in each point's hover label. Swept labels too close to the
    previous one are thinned the same way. Probes below the lowest swept level
    (refine halving down from a first level that failed) are labelled: they are
    a factor of two apart, and without them a run swept at 16 alone and probed
    at 8, 4, 2 and 3 had the one label 16. The axis is concurrency, or the
    offered rate in an open-loop run.
    """
    xs = sorted({lv.load for lv in levels if lv.load > 0})
    axis: dict[str, Any] = {"title": load_words(levels)[0]}
    if len(xs) >= 3 and xs[-1] / xs[0] >= 8:
        declared = {lv.load for lv in levels if lv.load > 0 and not lv.refine}
        users = all(lv.rate_rps is None for lv in levels)
        swept = sorted(declared | set(_halvings(min(declared), xs, users))) if declared else xs
        labelled = thin_log_ticks(swept, math.log10(xs[-1] / xs[0]))
        minor = [x for x in xs if x not in labelled]
        axis.update(type="log", tickvals=labelled, ticktext=[f"{x:g}" for x in labelled])
        if minor:
            axis["minor"] = dict(tickvals=minor, ticks="outside", ticklen=4, showgrid=False)
    return axis


def _halvings(lowest: float, xs: Sequence[float], users: bool) -> list[float]:
    """The refine probes that halved down from ``lowest`` (16 → 8 → 4 → 2; 6 → 3 → 1 in users), as run."""
    chain: list[float] = []
    x = lowest
    while x > 0:
        half = float(max(1, math.floor(x / 2))) if users else x / 2
        # a trace's speedups are rounded to 3 decimals before they run as rates: close, not equal
        found = next((v for v in xs if v < x and math.isclose(v, half, rel_tol=1e-6 if users else 2e-3)), None)
        if found is None:
            break
        chain.append(found)
        x = found
    return chain


def thin_log_ticks(values: Sequence[int], span: float) -> list[int]:
    """Keep tick values at least :data:`MIN_LABEL_GAP` of the log span apart (the last one always)."""
    kept: list[int] = []
    gap = MIN_LABEL_GAP * span
    for x in sorted(values):
        if kept and math.log10(x) - math.log10(kept[-1]) < gap:
            continue
        kept.append(x)
    if values and kept[-1] != max(values):
        last = max(values)
        if len(kept) > 1 and math.log10(last) - math.log10(kept[-1]) < gap:
            kept.pop()
        kept.append(last)
    return kept


#: The pages' template, serialised once per process (see :func:`figure_html`).
_TEMPLATE: dict[str, Any] = {}


def figure_html(fig: go.Figure) -> str:
    """The figure as an HTML fragment, in the ``plotly_white`` template (plotly.js comes with the page).

    The same bytes as ``update_layout(template="plotly_white")`` then ``pio.to_html(fig)``,
    about 2.4 times faster (21 against 9 ms a figure, and a report has a dozen or more): that
    way validates the template and deep-copies it, and the default template before it,
    on every figure. Here the figure is serialised without a template and the template's JSON,
    made once, is put first in its layout, where ``update_layout`` had it.
    """
    if not _TEMPLATE:  # as a figure's layout holds it (validated: its keys in plotly's order)
        _TEMPLATE.update(go.Figure(layout={"template": "plotly_white"}).to_plotly_json()["layout"]["template"])
    fig.layout.template = None
    fig.update_layout(margin=dict(l=60, r=30, t=60, b=50))
    spec = fig.to_plotly_json()
    spec["layout"] = {"template": _TEMPLATE, **spec["layout"]}
    return pio.to_html(spec, include_plotlyjs=False, full_html=False, config=PLOT_CONFIG, validate=False)


def mark_capacity(fig: go.Figure, analysis: Analysis, *, legend: bool = True, **where: Any) -> None:
    """Vertical lines at the capacity and the first failing level, named in the legend.

    Not labelled with ``annotation_text``: on a log x axis plotly places a
    vline's annotation at 10^x while the line stays at x (plotly.py #2580).
    """
    cap = analysis.capacity
    at, fail = (cap.rate_rps, cap.first_failing_rate_rps) if cap.rate_rps is not None or cap.max_tested_rate_rps else (
        cap.concurrency, cap.first_failing)
    marks = [
        (at, "#1a7f37", "dash", f"capacity ({at:g})" if at is not None else ""),
        (fail, "#cf222e", "dot", f"first failing level ({fail:g})" if fail is not None else ""),
    ]
    for x, colour, dash, label in marks:
        if x is None:
            continue
        fig.add_vline(x=x, line=dict(color=colour, dash=dash), **where)
        if legend:
            fig.add_trace(
                go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=colour, dash=dash), name=label),
                **where,
            )


def level_steps(levels: Sequence[LevelResult], origin: float) -> tuple[list[float], list[float]]:
    """The load in force (users, or an open loop's offered rate) against time (seconds since
    ``origin``), as the corners of a step line."""
    xs: list[float] = []
    ys: list[float] = []
    for lv in levels:
        xs += [lv.start_wall - origin, lv.end_wall - origin]
        ys += [lv.load, lv.load]
    return xs, ys


def rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"

