"""The report's replicas: each replica's running and waiting requests against time, beside the
client's latency, and the imbalance per level with each replica's share.

Shown only for a fleet (``target.metrics.urls`` or ``target.metrics.prometheus``): with one
server the server view's own plot is the whole story.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from loadtest.analysis.fleet import UNEVEN
from loadtest.analysis.results import Analysis
from loadtest.report.latency_lines import SIGNAL_COLOURS, add_client_latency, origin_of
from loadtest.report.page import esc as _e
from loadtest.report.plotting import level_steps, load_words


def replicas_time_figure(analysis: Analysis) -> go.Figure:
    """Per replica: running (solid) and waiting (dotted) requests; below, the client's latency."""
    view = analysis.server
    fleet = view.fleet
    origin = origin_of(analysis)
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4],
        subplot_titles=["each replica's requests (solid: running, dotted: waiting); grey: client users / replicas",
                        "client latency (median per bin)"],
    )
    levels = sorted(analysis.levels, key=lambda lv: lv.start_wall)
    xs, ys = level_steps(levels, origin)
    share = [y / len(fleet.replicas) if y is not None else None for y in ys]
    fig.add_trace(go.Scatter(x=xs, y=share, name=f"{load_words(levels)[1]} per replica", mode="lines", line_shape="hv",
                             line=dict(color="#6e7781", width=3)), row=1, col=1)
    running = view.first_of_role("running")
    waiting = view.first_of_role("waiting")
    for signal, dash in ((running, "solid"), (waiting, "dot")):
        if signal is None:
            continue
        for i, rid in enumerate(fleet.replicas):
            wall, value = fleet.replica_series.get(signal.metric, {}).get(rid, (np.array([]), np.array([])))
            fig.add_trace(go.Scatter(
                x=np.round(wall - origin, 2), y=value, name=f"{rid} {signal.role}", mode="lines",
                line=dict(color=SIGNAL_COLOURS[i % len(SIGNAL_COLOURS)], width=1.3, dash=dash, shape="hv"),
            ), row=1, col=1)
    add_client_latency(fig, analysis, origin, row=2)
    fig.update_yaxes(title="requests", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title="ms", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title="seconds since start", row=2, col=1)
    fig.update_layout(height=620, title=f"{len(fleet.replicas)} replicas against time, with the client's latency")
    return fig


def _num(value: float | None) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3g}"


def imbalance_table(analysis: Analysis) -> str:
    """Per level: the imbalance, and each replica's running requests p50 (max)."""
    view = analysis.server
    fleet = view.fleet
    running = view.first_of_role("running")
    head = f"<tr><th>{load_words(analysis.levels)[1]}</th><th>imbalance<br><span class='dim'>busiest / mean</span></th>" + "".join(
        f"<th>{_e(rid)}<br><span class='dim'>running p50 (max)</span></th>" for rid in fleet.replicas) + "</tr>"
    rows = []
    for lv in sorted(analysis.levels, key=lambda lv: (lv.load, lv.index)):
        imb = fleet.imbalance.get(lv.index)
        cells = []
        silent = fleet.reporting[lv.index].silent if lv.index in fleet.reporting else []
        for rid in fleet.replicas:
            st = fleet.replica_levels.get(lv.index, {}).get(rid, {}).get(running.metric) if running else None
            # a replica whose every scrape failed there: said as such, not an empty cell (it may be down)
            cells.append("<td class='num'>no answer ⚠</td>" if rid in silent
                         else "<td class='num'>–</td>" if st is None or not st.n
                         else f"<td class='num'>{_num(st.p50)} ({_num(st.max)})</td>")
        flag = " ⚠" if imb is not None and imb.ratio >= UNEVEN else ""
        rows.append(f"<tr><td class='num'>{lv.load_text}</td><td class='num'>{_num(imb.ratio if imb else None)}{flag}</td>"
                    f"{''.join(cells)}</tr>")
    return f"<table class='grid'>{head}{''.join(rows)}</table>"


def fleet_section(analysis: Analysis, figure_html: Callable[[go.Figure], str]) -> str:
    """The "Replicas" part of the server view: the sentence, the time plot, the imbalance per level."""
    a = analysis.autoscaling
    sentence = f"<p class='message'>{_e(a.fleet_sentence)}</p>" if a is not None and a.fleet_sentence else ""
    return ("<h3>Replicas</h3>" + sentence + figure_html(replicas_time_figure(analysis))
            + "<h4>Imbalance per level</h4>" + imbalance_table(analysis))
