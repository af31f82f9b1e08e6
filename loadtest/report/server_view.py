"""The report's "Server view": the server's own signals beside the client's numbers.

Three things, in the order a reader checks them: the signals against time,
lined up with the client's latency and the levels (does the server see the
load the client sends?); the signals per level with the capacity marks
(what "full" looks like in the server's units); and the recommendation
(thresholds, the best trigger, and the manifests of autoscaling.yaml).
"""

from __future__ import annotations


import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from loadtest.analysis.thresholds import fmt_signal
from loadtest.analysis.results import Analysis
from loadtest.analysis.signals import ROLE_LABELS
from loadtest.report.autoscaling_yaml import render_autoscaling_yaml
from loadtest.report.fleet_view import fleet_section
from loadtest.report.latency_lines import SIGNAL_COLOURS, add_client_latency, origin_of as _origin
from loadtest.report.page import esc as _e
from loadtest.report.plotting import concurrency_axis, level_steps, load_words, mark_capacity


def signals_time_figure(analysis: Analysis) -> go.Figure:
    """Users (steps), the server's request counts, cache fractions, and client latency on one time axis."""
    view = analysis.server
    origin = _origin(analysis)
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
        subplot_titles=[f"client {load_words(analysis.levels)[0]} and the server's requests", "server cache usage",
                        "client latency (median per bin)"],
    )
    levels = sorted(analysis.levels, key=lambda lv: lv.start_wall)
    xs, ys = level_steps(levels, origin)
    fig.add_trace(go.Scatter(x=xs, y=ys, name=f"client {load_words(levels)[0]}", mode="lines", line_shape="hv",
                             line=dict(color="#6e7781", width=3)), row=1, col=1)
    for i, signal in enumerate(view.signals):
        wall, value = view.series.get(signal.metric, (np.array([]), np.array([])))
        row = 2 if signal.is_fraction else 1
        scale = 100.0 if signal.is_fraction else 1.0
        if signal.role in ("kv_tokens", "batch_tokens"):
            continue  # token counts dwarf request counts; they are in the per-level table
        fig.add_trace(
            go.Scatter(x=np.round(wall - origin, 2), y=value * scale, name=signal.metric, mode="lines",
                       line=dict(color=SIGNAL_COLOURS[i % len(SIGNAL_COLOURS)], width=1.5)),
            row=row, col=1,
        )
    add_client_latency(fig, analysis, origin, row=3)
    for lv in levels:
        for row in (1, 2, 3):
            if lv.window_start > lv.start_wall:
                fig.add_vrect(x0=lv.start_wall - origin, x1=lv.window_start - origin, fillcolor="#d0d7de",
                              opacity=0.35, line_width=0, layer="below", row=row, col=1)
    fig.update_yaxes(title="requests", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title="% used", rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title="ms", rangemode="tozero", row=3, col=1)
    fig.update_xaxes(title="seconds since start (grey: warmup, not measured)", row=3, col=1)
    fig.update_layout(height=760, title="Server signals against time, with the client's users and latency")
    return fig


def signals_per_level_figure(analysis: Analysis) -> go.Figure:
    """Each signal's p50 (marker) with p95 and max (bars) per level; request counts beside users."""
    view = analysis.server
    levels = [lv for lv in analysis.levels if lv.status != "no_data"]
    words = load_words(levels)
    fig = make_subplots(rows=1, cols=2, subplot_titles=[f"requests (server) against {words[0]} (client)", "cache usage (%)"])
    xs = [lv.load for lv in levels]
    if xs and words[1] == "users":  # a closed loop's users are its requests; an open loop's rate is not
        fig.add_trace(go.Scatter(x=xs, y=xs, name="users = requests", mode="lines",
                                 line=dict(color="#d0d7de", dash="dot")), row=1, col=1)
    for i, signal in enumerate(view.signals):
        if signal.role in ("kv_tokens", "batch_tokens"):
            continue
        col = 2 if signal.is_fraction else 1
        scale = 100.0 if signal.is_fraction else 1.0
        stats = [view.stats(lv.index, signal.metric) for lv in levels]
        p50 = [s.p50 * scale if s and s.n else None for s in stats]
        p95 = [s.p95 * scale if s and s.n else None for s in stats]
        mx = [s.max * scale if s and s.n else None for s in stats]
        colour = SIGNAL_COLOURS[i % len(SIGNAL_COLOURS)]
        fig.add_trace(
            go.Scatter(
                x=xs, y=p50, name=f"{signal.metric} p50 (bar to p95)", mode="lines+markers", line=dict(color=colour),
                error_y=dict(type="data", symmetric=False,
                             array=[(b - a) if a is not None and b is not None else 0 for a, b in zip(p50, p95)]),
            ),
            row=1, col=col,
        )
        fig.add_trace(go.Scatter(x=xs, y=mx, name=f"{signal.metric} max", mode="markers",
                                 marker=dict(color=colour, symbol="x")), row=1, col=col)
    mark_capacity(fig, analysis, row=1, col=1)
    mark_capacity(fig, analysis, legend=False, row=1, col=2)
    for col in (1, 2):
        fig.update_xaxes(**concurrency_axis(levels), row=1, col=col)
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_layout(height=440, title="Server signals per level (over each level's measured window)")
    return fig


def levels_table(analysis: Analysis) -> str:
    view = analysis.server
    signals = view.signals
    head = f"<tr><th>{load_words(analysis.levels)[1]}</th><th>scrapes (failed)</th>" + "".join(
        f"<th>{_e(s.metric)}<br><span class='dim'>p50 / p95 / max</span></th>" for s in signals
    ) + "</tr>"
    rows = []
    for lv in analysis.levels:
        health = view.health.get(lv.index)
        cells = []
        for s in signals:
            st = view.stats(lv.index, s.metric)
            frac = s.is_fraction
            cells.append(
                "<td class='num'>–</td>" if st is None or not st.n
                else f"<td class='num'>{fmt_signal(st.p50, frac)} / {fmt_signal(st.p95, frac)} / {fmt_signal(st.max, frac)}</td>"
            )
        scrapes = f"{health.scrapes} ({health.failed})" if health else "–"
        rows.append(f"<tr><td class='num'>{lv.load_text}</td><td class='num'>{scrapes}</td>{''.join(cells)}</tr>")
    return f"<table class='grid'>{head}{''.join(rows)}</table>"


def recommendation_table(analysis: Analysis) -> str:
    a = analysis.autoscaling
    if a is None or not a.signals:
        return ""
    rows = []
    for s in a.signals:
        frac = s.role == "kv_cache"
        cap = s.at_capacity
        fail = s.at_first_failing
        best = " <b>(recommended)</b>" if s.metric == a.best else ""
        rows.append(
            f"<tr><td>{_e(s.metric)}{best}<br><span class='dim'>{_e(ROLE_LABELS.get(s.role, s.role))}, {_e(s.server)}</span></td>"
            f"<td class='num'>{fmt_signal(cap.p50, frac) if cap.n else '–'} / {fmt_signal(cap.p95, frac) if cap.n else '–'}</td>"
            f"<td class='num'>{fmt_signal(fail.p50, frac) if fail and fail.n else '–'} / {fmt_signal(fail.p95, frac) if fail and fail.n else '–'}</td>"
            f"<td class='num'><b>{fmt_signal(s.threshold, frac)}</b></td><td>{_e(s.why)}</td></tr>"
        )
    return (
        "<table class='grid'><tr><th>signal</th><th>at capacity p50 / p95</th><th>at first failing p50 / p95</th>"
        "<th>scale-out threshold (per replica)</th><th>why</th></tr>" + "".join(rows) + "</table>"
    )


def server_section(analysis: Analysis, figure_html) -> str:
    """The whole "Server view" section (``figure_html`` renders a figure like the rest of the report)."""
    view = analysis.server
    a = analysis.autoscaling
    paragraph = f"<p class='message'>{_e(a.paragraph)}</p>" if a is not None else ""
    if view is None:
        return paragraph + "<p>The server's metrics were not scraped in this run (--no-server-metrics or target.metrics: false).</p>"
    total = view.total
    n = len(view.fleet.replicas) if view.fleet is not None else 0
    source = _e(view.url) if view.fleet is None else f"{n} replica{'s' if n != 1 else ''} ({_e(', '.join(view.fleet.replicas))})"
    health = (
        f"<p class='dim'>Scraped {source}: {total.scrapes} scrapes, {total.failed} failed"
        + (f" ({_e('; '.join(f'{k}: {v}' for k, v in total.errors.items()))})" if total.errors else "")
        + ". Samples: server_metrics.parquet.</p>"
    )
    if not view.signals:
        return paragraph + health + "<p>No known server signal in the scrapes (see the warnings).</p>"
    yaml_text = render_autoscaling_yaml(analysis)
    return (
        paragraph + health
        + figure_html(signals_time_figure(analysis))
        + (fleet_section(analysis, figure_html) if view.fleet is not None else "")
        + "<h3>Signals per level</h3>" + levels_table(analysis)
        + figure_html(signals_per_level_figure(analysis))
        + "<h3>Scale-out thresholds</h3>" + recommendation_table(analysis)
        + "<details><summary>autoscaling.yaml (KEDA ScaledObject and HPA on the recommended signal)</summary>"
        + f"<pre>{_e(yaml_text)}</pre></details>"
    )
