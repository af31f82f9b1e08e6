"""``report.html``: one self-contained page for the person who must size the deployment.

Reading order follows the decision: the verdict and what it means in replicas
first, then why (latency percentiles against concurrency with the SLO lines
and confidence bands), then what it buys (throughput, goodput, the knee), and
last the evidence a sceptic wants (distributions, the run's timeline, errors,
warnings, the exact scenario).

The file works offline and from an e-mail attachment: plotly.js is inlined
once in ``<head>`` (~4.8 MB) and every figure reuses it. Figure data is kept
small (≤ 2000 points per level and metric for distributions, ≤ 1500 time bins
for the timeline), so even a 100k-request run stays well under 8 MB.
"""

from __future__ import annotations

import html
import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from loadtest.analysis.capacity import ci_label, fmt_ms
from loadtest.analysis.results import Analysis, LevelResult
from loadtest.analysis.slo import METRIC_LABELS
from loadtest.redact import scrub
from loadtest.report.terminal import describe_ending, describe_hold
from loadtest.report.workload_figures import class_figure, has_classes, has_turns, turn_figure

REPORT_HTML = "report.html"
TIMELINE_BINS = 1500

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


# -- small helpers ------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _finite(values: Iterable[float]) -> list[float | None]:
    """Plotly-safe values: NaN/inf become gaps (None)."""
    return [float(v) if v is not None and math.isfinite(v) else None for v in values]


#: Labelled ticks closer than this share of the axis's log span would print on top of each other
#: (a label is ~30 px on a subplot ~500 px wide).
MIN_LABEL_GAP = 0.07


def _concurrency_axis(levels: Sequence[LevelResult]) -> dict[str, Any]:
    """Log axis labelled at the swept levels when the sweep is geometric.

    Refine probes (20, 22, 23, 24 between 16 and 32) would print their labels
    on top of each other on a log axis: they get an unlabelled minor tick, and
    their value is in each point's hover label. Swept labels too close to the
    previous one are thinned the same way. The axis is concurrency, or the
    offered rate in an open-loop run.
    """
    xs = sorted({lv.load for lv in levels if lv.load > 0})
    open_loop = any(lv.rate_rps is not None for lv in levels)
    axis: dict[str, Any] = {"title": "offered rate (requests/s)" if open_loop else "concurrent users"}
    if len(xs) >= 3 and xs[-1] / xs[0] >= 8:
        swept = sorted({lv.load for lv in levels if lv.load > 0 and not lv.refine}) or xs
        labelled = thin_log_ticks(swept, math.log10(xs[-1] / xs[0]))
        minor = [x for x in xs if x not in labelled]
        axis.update(type="log", tickvals=labelled, ticktext=[f"{x:g}" for x in labelled])
        if minor:
            axis["minor"] = dict(tickvals=minor, ticks="outside", ticklen=4, showgrid=False)
    return axis


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


def _figure_html(fig: go.Figure) -> str:
    fig.update_layout(template="plotly_white", margin=dict(l=60, r=30, t=60, b=50))
    return pio.to_html(fig, include_plotlyjs=False, full_html=False, config=PLOT_CONFIG)


def _mark_capacity(fig: go.Figure, analysis: Analysis, *, legend: bool = True, **where: Any) -> None:
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


# -- figures --------------------------------------------------------------------------------


def latency_figure(analysis: Analysis) -> go.Figure:
    """TTFT, ITL, TPOT and e2e percentiles against concurrency, with SLO limits and CI bands."""
    metrics = ["ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"]
    fig = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=[f"{METRIC_LABELS[m]} (ms{', per token' if m == 'itl_ms' else ''})" for m in metrics],
        horizontal_spacing=0.08,
        vertical_spacing=0.14,
    )
    levels = [lv for lv in analysis.levels if lv.status != "no_data"]
    xs = [lv.load for lv in levels]
    for i, metric in enumerate(metrics):
        row, col = i // 2 + 1, i % 2 + 1
        checked = {c.percentile for c in analysis.slo.checks if c.metric == metric}
        for pct in ("p50", "p95", "p99"):
            colour = PCT_COLOURS[pct]
            if pct in checked:
                lo = _finite(lv.metric(metric).ci.get(pct, (math.nan, math.nan))[0] for lv in levels)
                hi = _finite(lv.metric(metric).ci.get(pct, (math.nan, math.nan))[1] for lv in levels)
                fig.add_trace(
                    go.Scatter(x=xs, y=hi, mode="lines", line=dict(width=0), showlegend=False, hoverinfo="skip",
                               legendgroup=pct),
                    row=row, col=col,
                )
                fig.add_trace(
                    go.Scatter(x=xs, y=lo, mode="lines", line=dict(width=0), fill="tonexty",
                               fillcolor=_rgba(colour, 0.18), name=f"{pct} CI", legendgroup=pct,
                               showlegend=i == 0, hoverinfo="skip"),
                    row=row, col=col,
                )
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=_finite(lv.metric(metric).percentile(pct) for lv in levels),
                    mode="lines+markers",
                    name=pct,
                    legendgroup=pct,
                    showlegend=i == 0,
                    line=dict(color=colour),
                    hovertemplate=f"{pct}: %{{y:.1f}} ms at %{{x}} users<extra></extra>",
                ),
                row=row, col=col,
            )
        for check in analysis.slo.checks:
            if check.metric == metric:
                fig.add_hline(
                    y=check.limit, line=dict(color=PCT_COLOURS.get(check.percentile, "#000"), dash="dash"),
                    annotation_text=f"SLO {check.percentile} ≤ {check.limit:g}", row=row, col=col,
                )
        _mark_capacity(fig, analysis, legend=i == 0, row=row, col=col)
        fig.update_xaxes(**_concurrency_axis(levels), row=row, col=col)
        fig.update_yaxes(title="ms", rangemode="tozero", row=row, col=col)
    fig.update_layout(height=720, title="Latency against concurrency")
    return fig


def throughput_figure(analysis: Analysis) -> go.Figure:
    levels = [lv for lv in analysis.levels if lv.status != "no_data"]
    xs = [lv.load for lv in levels]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=xs, y=_finite(lv.requests_per_s for lv in levels), name="requests/s",
                             mode="lines+markers"), secondary_y=False)
    fig.add_trace(go.Scatter(x=xs, y=_finite(lv.goodput_rps for lv in levels), name="goodput (requests/s within SLO)",
                             mode="lines+markers", line=dict(color="#1a7f37")), secondary_y=False)
    fig.add_trace(go.Scatter(x=xs, y=_finite(lv.output_tokens_per_s for lv in levels), name="output tokens/s",
                             mode="lines+markers", line=dict(dash="dot", color="#8250df")), secondary_y=True)
    _mark_capacity(fig, analysis)
    fig.update_xaxes(**_concurrency_axis(levels))
    fig.update_yaxes(title="requests/s", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title="output tokens/s", rangemode="tozero", secondary_y=True)
    fig.update_layout(height=420, title="Throughput and goodput against concurrency")
    return fig


def knee_figure(analysis: Analysis) -> go.Figure:
    """Latency against delivered throughput: where more load stops buying tokens/s."""
    levels = [lv for lv in analysis.levels if lv.status != "no_data"]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["p95 TTFT (ms)", "p95 ITL (ms per token)"])
    for col, metric in ((1, "ttft_ms"), (2, "itl_ms")):
        fig.add_trace(
            go.Scatter(
                x=_finite(lv.output_tokens_per_s for lv in levels),
                y=_finite(lv.metric(metric).p95 for lv in levels),
                text=[f"{lv.load:g}" for lv in levels],
                # refine probes sit close together: their label is in the hover only
                texttemplate=["" if lv.refine else "%{text}" for lv in levels],
                mode="lines+markers+text",
                textposition="top center",
                marker=dict(color=[STATUS_COLOURS.get(lv.status, "#000") for lv in levels], size=9),
                line=dict(color="#6e7781"),
                showlegend=False,
                hovertemplate="%{text} users: %{x:.0f} tok/s, p95 %{y:.1f} ms<extra></extra>",
            ),
            row=1, col=col,
        )
        for check in analysis.slo.checks:
            if check.metric == metric and check.percentile == "p95":
                fig.add_hline(y=check.limit, line=dict(color="#cf222e", dash="dash"),
                              annotation_text=f"SLO ≤ {check.limit:g}", row=1, col=col)
        fig.update_xaxes(title="output tokens/s", rangemode="tozero", row=1, col=col)
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_layout(height=420, title="Latency against throughput (labels: concurrent users; colour: verdict)")
    return fig


def distribution_figure(analysis: Analysis) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=["TTFT (ms)", "ITL (ms per token)"])
    for col, metric in ((1, "ttft_ms"), (2, "itl_ms")):
        for lv in analysis.levels:
            values = lv.samples.get(metric)
            if values is None or not len(values):
                continue
            fig.add_trace(
                go.Box(
                    y=np.round(np.asarray(values, dtype=float), 2),
                    name=f"{lv.load:g}",
                    boxpoints=False,
                    marker_color=STATUS_COLOURS.get(lv.status, "#000"),
                    showlegend=False,
                ),
                row=1, col=col,
            )
        fig.update_xaxes(title="concurrent users", type="category", row=1, col=col)
        fig.update_yaxes(title="ms", row=1, col=col)
    fig.update_layout(height=440, title="Per-level distributions (subsample of successful samples; failures not shown)")
    return fig


def level_steps(levels: Sequence[LevelResult], origin: float) -> tuple[list[float], list[int]]:
    """The users in force against time (seconds since ``origin``), as the corners of a step line."""
    xs: list[float] = []
    ys: list[int] = []
    for lv in levels:
        xs += [lv.start_wall - origin, lv.end_wall - origin]
        ys += [lv.load, lv.load]
    return xs, ys


def timeline_figure(analysis: Analysis) -> go.Figure:
    """Active concurrency as steps, requests and errors per second, warmup shaded."""
    frame = analysis.requests
    origin = analysis.run.get("started_wall")
    starts_all = [lv.start_wall for lv in analysis.levels]
    if origin is None:
        origin = min(starts_all) if starts_all else (float(frame["start_wall"].min()) if len(frame) else 0.0)
    origin = float(origin)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    in_run = sorted(analysis.levels, key=lambda lv: lv.start_wall)
    if in_run:
        xs, ys = level_steps(in_run, origin)
        fig.add_trace(go.Scatter(x=xs, y=ys, name="concurrent users", mode="lines", line_shape="hv",
                                 line=dict(color="#6e7781")), secondary_y=True)
        for lv in in_run:
            if lv.window_start > lv.start_wall:
                fig.add_vrect(x0=lv.start_wall - origin, x1=lv.window_start - origin, fillcolor="#d0d7de",
                              opacity=0.35, line_width=0, layer="below")
    if len(frame):
        start = frame["start_wall"].to_numpy(dtype=float) - origin
        valid = np.isfinite(start)
        if valid.any():
            lo, hi = float(np.min(start[valid])), float(np.max(start[valid]))
            width = max(1.0, math.ceil((hi - lo) / TIMELINE_BINS)) if hi > lo else 1.0
            edges = np.arange(math.floor(lo), hi + width, width)
            if len(edges) < 2:
                edges = np.array([lo, lo + width])
            centres = (edges[:-1] + edges[1:]) / 2
            failed = frame["failed"].to_numpy(dtype=bool)
            total, _ = np.histogram(start[valid], bins=edges)
            errors, _ = np.histogram(start[valid & failed], bins=edges)
            fig.add_trace(go.Scatter(x=np.round(centres, 2), y=total / width, name="requests/s (by start)",
                                     mode="lines", line=dict(color="#2f81f7")), secondary_y=False)
            fig.add_trace(go.Bar(x=np.round(centres, 2), y=errors / width, name="errors/s", marker_color="#cf222e",
                                 opacity=0.7), secondary_y=False)
    fig.update_xaxes(title="seconds since start (grey: warmup, not measured)")
    fig.update_yaxes(title="per second", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title="concurrent users", rangemode="tozero", secondary_y=True)
    fig.update_layout(height=400, title="Run timeline", bargap=0)
    return fig


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


# -- HTML sections ---------------------------------------------------------------------------


def _header(analysis: Analysis) -> str:
    cap = analysis.capacity
    colour = VERDICT_COLOURS.get(cap.verdict, "#000")
    target = analysis.target
    started = analysis.run.get("started_wall")
    date = (
        datetime.fromtimestamp(float(started), tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        if started is not None
        else "unknown date"
    )
    if cap.rate_rps is not None:
        big = f"{'≥ ' if cap.verdict == 'at_least' else ''}{cap.rate_rps:g} requests/s"
        if cap.mean_in_flight is not None:
            big += f" (mean {cap.mean_in_flight:.1f} in flight)"
    elif cap.concurrency is None:
        big = "below the lowest level" if cap.verdict in ("below_minimum", "client_saturated", "host_contended") else "unknown"
    elif cap.verdict == "at_least":
        big = f"≥ {cap.concurrency} concurrent users"
    else:
        big = f"{cap.concurrency} concurrent users"
    sources = ", ".join(f"{k} ({v} requests)" for k, v in analysis.token_source.items()) or "unknown"
    slo = ", ".join(
        [f"{c.name} ≤ {c.limit:g} ms" for c in analysis.slo.checks]
        + ([f"error rate ≤ {analysis.slo.max_error_rate:.2%}"] if analysis.slo.max_error_rate is not None else [])
    ) or "none defined"
    for name, spec in analysis.class_slos.items():
        slo += f"; class {name}: " + (", ".join(
            [f"{c.name} ≤ {c.limit:g} ms" for c in spec.checks]
            + ([f"error rate ≤ {spec.max_error_rate:.2%}"] if spec.max_error_rate is not None else [])
        ) or "none")
    facts = [
        ("Verdict", cap.verdict.replace("_", " ")),
        ("Binding SLO", (f"{cap.binding_class}: " if cap.binding_class and cap.binding else "") + _binding_at(cap)),
        ("At capacity", _at_capacity(cap)),
        ("Target", f"{target.get('model', '?')} · {target.get('base_url', '?')} · {target.get('api', '?')}"),
        ("SLOs", slo),
        ("Date", date),
        ("Token counts", sources),
        ("ITL unit", "per token (a chunk's gap is spread over its tokens)"),
    ]
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    return f"""
<section class="verdict" style="border-color:{colour}">
  <p class="headline" id="headline">{_e(plain_verdict(analysis))}</p>
  <div class="cap" style="color:{colour}">Capacity: {_e(big)}</div>
  <p class="message">{_e(cap.message)}</p>
  <table class="facts">{rows}</table>
  {_calculator(analysis)}
</section>"""


def _binding_at(cap: Any) -> str:
    if not cap.binding:
        return "—"
    if cap.first_failing_rate_rps is not None:
        return f"{cap.binding} at {cap.first_failing_rate_rps:g} req/s"
    return f"{cap.binding} at {cap.first_failing} users"


def plain_verdict(analysis: Analysis) -> str:
    """The verdict in plain words, no numbers: what a reader needs before any figure."""
    cap = analysis.capacity
    if cap.verdict == "found":
        words = "The endpoint meets every SLO up to the capacity below"
        words += f"; with more users, {_binding_words(analysis)} breaks its limit first." if cap.binding else "."
    elif cap.verdict == "at_least":
        words = "The endpoint met every SLO at every level tested: its real limit is higher than this run went."
    elif cap.verdict == "below_minimum":
        words = "The endpoint missed the SLOs even at the lowest level tested: under these SLOs it has no capacity."
    elif cap.verdict == "uncertain":
        words = ("Not decided: some levels were too close to their limits to call with confidence, "
                 "so the capacity is a range (below).")
    elif cap.verdict == "client_saturated":
        words = "Not trustworthy: the load generator itself was too busy to time the requests accurately."
    elif cap.verdict == "host_contended":
        words = ("Not trustworthy: the machine running the load generator was busy with other work, "
                 "so the requests could not be timed accurately. Re-run on a quieter machine.")
    else:
        words = "Nothing was measured: no level produced a usable request."
    if analysis.run.get("complete") is False:
        words += " The run was stopped before it finished, so this is a partial result."
    return words


def _binding_words(analysis: Analysis) -> str:
    binding = analysis.capacity.binding
    for check in analysis.slo.checks:
        if check.name == binding:
            return f"the {check.label}"
    return "the error rate" if binding and "error" in str(binding) else f"{binding}"


def _at_capacity(cap: Any) -> str:
    if cap.requests_per_s is None:
        return "—"
    parts = [f"{cap.requests_per_s:.2f} req/s", f"{cap.output_tokens_per_s:.0f} output tok/s"]
    if cap.goodput_rps is not None and math.isfinite(cap.goodput_rps):
        parts.append(f"goodput {cap.goodput_rps:.2f} req/s")
    return " · ".join(parts) + " per replica"


def _calculator(analysis: Analysis) -> str:
    """A two-field replica estimate: peak users / capacity, peak req/s / goodput at capacity."""
    cap = analysis.capacity
    if cap.concurrency is None or cap.verdict == "no_data":
        return ""
    goodput = cap.goodput_rps if cap.goodput_rps is not None and math.isfinite(cap.goodput_rps) else 0.0
    return f"""
<div class="calc">
  <b>Replicas needed</b> (assumes identical replicas and an even load balancer):
  peak concurrent users <input id="calc-users" type="number" min="0" value="{cap.concurrency * 4}">
  → <span id="calc-users-out"></span>;
  peak requests/s <input id="calc-rps" type="number" min="0" step="any" value="{max(1, round(goodput * 4, 1))}">
  → <span id="calc-rps-out"></span>
</div>
<script>
(function() {{
  var cap = {cap.concurrency}, good = {goodput:.6f};
  function upd() {{
    var u = parseFloat(document.getElementById('calc-users').value) || 0;
    var r = parseFloat(document.getElementById('calc-rps').value) || 0;
    document.getElementById('calc-users-out').textContent = cap > 0 ? Math.ceil(u / cap) + ' replicas' : 'n/a';
    document.getElementById('calc-rps-out').textContent = good > 0 ? Math.ceil(r / good) + ' replicas' : 'n/a';
  }}
  document.getElementById('calc-users').addEventListener('input', upd);
  document.getElementById('calc-rps').addEventListener('input', upd);
  upd();
}})();
</script>"""


def _cell_ms(level: LevelResult, metric: str, pct: str) -> str:
    value = level.metric(metric).percentile(pct)
    if math.isnan(value):
        return "<td class='num dim'>–</td>"
    verdicts = [c.verdict for c in level.checks if c.metric == metric and c.percentile == pct and c.class_name is None]
    style = f" style='color:{STATUS_COLOURS[verdicts[0]]}'" if verdicts else ""
    text = "∞" if math.isinf(value) else fmt_ms(value)
    return f"<td class='num'{style}>{_e(text)}</td>"


def _levels_table(analysis: Analysis) -> str:
    unit = "offered req/s" if any(lv.rate_rps is not None for lv in analysis.levels) else "users"
    head = (
        f"<tr><th>{unit}</th><th>requests</th><th>errors</th><th>TTFT p50</th><th>TTFT p95</th><th>TTFT p99</th>"
        "<th>ITL p50</th><th>ITL p95</th><th>ITL p99</th><th>TPOT p95</th><th>e2e p95</th><th>req/s</th>"
        "<th>tok/s</th><th>goodput</th><th>spillover</th><th>ran</th><th>verdict</th></tr>"
    )
    rows = []
    for lv in analysis.levels:
        flags = []
        if lv.refine:
            flags.append("refine")
        if lv.client_saturated:
            flags.append("client saturated")
        if lv.host_contended:
            flags.append("host busy")
        err = f"{lv.errors} ({lv.error_rate:.1%})" if lv.requests else "–"
        rows.append(
            "<tr>"
            f"<td class='num'>{lv.load:g}</td><td class='num'>{lv.requests}</td><td class='num'>{_e(err)}</td>"
            + _cell_ms(lv, "ttft_ms", "p50") + _cell_ms(lv, "ttft_ms", "p95") + _cell_ms(lv, "ttft_ms", "p99")
            + _cell_ms(lv, "itl_ms", "p50") + _cell_ms(lv, "itl_ms", "p95") + _cell_ms(lv, "itl_ms", "p99")
            + _cell_ms(lv, "tpot_ms", "p95") + _cell_ms(lv, "e2e_ms", "p95")
            + f"<td class='num'>{_num(lv.requests_per_s, '.2f')}</td>"
            f"<td class='num'>{_num(lv.output_tokens_per_s, '.0f')}</td>"
            f"<td class='num'>{_num(lv.goodput_rps, '.2f')}</td><td class='num'>{lv.spillover}</td>"
            + _ran_cell(lv.decision)
            + f"<td style='color:{STATUS_COLOURS.get(lv.status, '#000')}'><b>{_e(lv.status)}</b>"
            f"{' · ' + _e(', '.join(flags)) if flags else ''}</td></tr>"
        )
    checks = _checks_table(analysis)
    return f"<table class='grid'>{head}{''.join(rows)}</table>{_open_loop_table(analysis)}{checks}"


def _open_loop_table(analysis: Analysis) -> str:
    """Open loop: was the schedule kept (send lag), and did the server keep up (completions)?"""
    levels = [lv for lv in analysis.levels if lv.open_loop]
    if not levels:
        return ""
    rows = []
    for lv in levels:
        o = lv.open_loop
        lag = o["schedule_lag_ms"]
        note = "" if o["server_kept_up"] else "the server could not keep up"
        if o["client_late"]:
            note = "; ".join(x for x in (note, "sends fell behind: client saturated") if x)
        rows.append(
            f"<tr><td class='num'>{lv.load:g}</td><td class='num'>{_num(o['offered_rps'], '.2f')}</td>"
            f"<td class='num'>{_num(o['sent_rps'], '.2f')}</td><td class='num'>{_num(o['completed_rps'], '.2f')}</td>"
            f"<td class='num'>{o['dropped']}</td><td class='num'>{_num(lag['p50'], '.2f')}</td>"
            f"<td class='num'>{_num(lag['p99'], '.2f')}</td><td class='num'>{lag['late']}</td>"
            f"<td class='num'>{_num(o['mean_in_flight'], '.1f')}</td><td>{_e(note)}</td></tr>"
        )
    head = (
        "<tr><th>rate</th><th>offered req/s</th><th>sent req/s</th><th>completed req/s</th><th>dropped</th>"
        "<th>send lag p50 ms</th><th>send lag p99 ms</th><th>sends &gt; 10 ms late</th><th>mean in flight</th><th></th></tr>"
    )
    return (
        "<h3>Open loop: offered, sent and completed</h3><p class='dim'>Latencies above are measured from each "
        "request's scheduled time, so they include the send lag and any wait the server's queue caused.</p>"
        f"<table class='grid'>{head}{''.join(rows)}</table>"
    )


def _ran_cell(decision: dict) -> str:
    """How long the level ran and why it ended; every look in the tooltip."""
    if not decision or decision.get("ran_s") is None:
        return "<td class='num dim'>–</td>"
    looks = "; ".join(
        f"at {look.get('at_s', 0):g} s: {look.get('verdict')} ({look.get('why', '')})"
        for look in decision.get("looks_taken") or []
    )
    why = describe_ending(decision)
    held = describe_hold(decision.get("hold"))  # how long its load stayed for its measured requests
    why += f"; {held}" if held else ""
    return f"<td class='num' title='{_e(looks)}'>{decision['ran_s']:.0f} s<br><span class='dim'>{_e(why)}</span></td>"


def _checks_table(analysis: Analysis) -> str:
    rows = []
    for lv in analysis.levels:
        for c in lv.checks:
            if c.metric == "error_rate":
                value = f"{c.value:.2%}" if math.isfinite(c.value) else "–"
                ci = f"{c.ci[0]:.2%} – {c.ci[1]:.2%}" if math.isfinite(c.ci[0]) else "–"
                limit = f"{c.limit:.2%}"
            else:
                value = fmt_ms(c.value) if not math.isnan(c.value) else "–"
                ci = f"{fmt_ms(c.ci[0])} – {fmt_ms(c.ci[1])}" if not math.isnan(c.ci[0]) else "–"
                limit = f"{c.limit:g}"
            rows.append(
                f"<tr><td class='num'>{lv.load:g}</td><td>{_e(f'{c.class_name}: {c.name}' if c.class_name else c.name)}</td><td class='num'>{_e(value)}</td>"
                f"<td class='num'>{_e(ci)}</td><td class='num'>{_e(limit)}</td><td class='num'>{c.n}"
                f"{' (low n)' if c.low_n else ''}</td>"
                f"<td style='color:{STATUS_COLOURS.get(c.verdict, '#000')}'>{_e(c.verdict)}"
                f"{': ' + _e(c.reason) if c.reason else ''}</td></tr>"
            )
    if not rows:
        return ""
    label = ci_label(analysis.confidence)
    return (
        f"<details><summary>Every SLO check with its {label}</summary><table class='grid'>"
        f"<tr><th>users</th><th>check</th><th>value</th><th>{label}</th><th>limit</th><th>n</th><th>verdict</th></tr>"
        + "".join(rows) + "</table></details>"
    )


def _num(value: float, fmt: str) -> str:
    return "–" if value is None or not math.isfinite(value) else format(value, fmt)


def _errors_section(analysis: Analysis) -> str:
    kinds = sorted({k for lv in analysis.levels for k in lv.errors_by_kind})
    cancelled = sum(lv.cancelled for lv in analysis.levels)
    note = (
        f"<p class='dim'>{cancelled} requests were cancelled by the harness when users stopped at a level change "
        "or at the end of the run; they are not errors and are not counted in any rate.</p>"
        if cancelled
        else ""
    )
    if not kinds:
        return "<p>No failed request in any measured window.</p>" + note
    head = "<tr><th>users</th><th>requests</th><th>errors</th>" + "".join(f"<th>{_e(k)}</th>" for k in kinds) + "</tr>"
    rows = [
        f"<tr><td class='num'>{lv.load:g}</td><td class='num'>{lv.requests}</td><td class='num'>{lv.errors}</td>"
        + "".join(f"<td class='num'>{lv.errors_by_kind.get(k, 0)}</td>" for k in kinds)
        + "</tr>"
        for lv in analysis.levels
    ]
    messages = ""
    frame = analysis.requests
    if len(frame) and "error" in frame:
        failed = frame[frame["failed"]]
        if len(failed):
            top = (
                failed.assign(kind=failed["error_kind"].fillna("unknown"), msg=failed["error"].fillna(""))
                .groupby(["kind", "msg"], sort=False)
                .size()
                .sort_values(ascending=False)
                .head(15)
            )
            items = "".join(
                f"<tr><td>{_e(kind)}</td><td class='num'>{count}</td><td><code>{_e(str(msg)[:300])}</code></td></tr>"
                for (kind, msg), count in top.items()
            )
            messages = (
                "<h3>Most frequent error messages (whole run)</h3><table class='grid'>"
                "<tr><th>kind</th><th>count</th><th>message</th></tr>" + items + "</table>"
            )
    return f"<table class='grid'>{head}{''.join(rows)}</table>{note}{messages}"


def _warnings_section(analysis: Analysis) -> str:
    if not analysis.warnings:
        return "<p>None.</p>"
    return "<ul class='warnings'>" + "".join(f"<li>{_e(w)}</li>" for w in analysis.warnings) + "</ul>"


def _scenario_section(analysis: Analysis) -> str:
    scenario = analysis.run.get("scenario") or {}
    try:
        import yaml

        text = yaml.safe_dump(scenario, sort_keys=False, allow_unicode=True)
    except Exception:  # unserializable values: fall back to JSON, which stringifies them
        text = json.dumps(scenario, indent=2, default=str)
    host = analysis.run.get("host") or {}
    versions = (
        f"loadtest {analysis.run.get('tool_version', '?')} · Python {analysis.run.get('python', '?')} · "
        f"Locust {analysis.run.get('locust', '?')} · host {host.get('hostname', '?')} "
        f"({host.get('cpus', '?')} CPUs, {host.get('platform', '?')})"
    )
    workers = analysis.run.get("workers") or []
    if workers and workers != ["local"]:
        # Locust names workers <hostname>_<id>: the hosts that generated the load.
        hosts = sorted({str(w).rsplit("_", 1)[0] for w in workers})
        versions += f" · {len(workers)} workers on {', '.join(hosts)} (mode {analysis.run.get('mode', '?')})"
    return f"<p class='dim'>{_e(versions)}</p><pre>{_e(text)}</pre>"


STYLE = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;margin:0 auto;max-width:1200px;
padding:16px 24px;color:#1f2328}
h1{font-size:1.5em;margin:.2em 0}h2{margin-top:1.6em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
.verdict{border-left:8px solid;padding:8px 16px;background:#f6f8fa;border-radius:6px}
.cap{font-size:2.2em;font-weight:700}.message{font-size:1.15em}
.facts th{text-align:left;padding-right:16px;color:#57606a;font-weight:600}.facts td{padding:2px 0}
table.grid{border-collapse:collapse;margin:8px 0;font-size:.9em}
table.grid th,table.grid td{border:1px solid #d0d7de;padding:3px 8px}table.grid th{background:#f6f8fa}
td.num{text-align:right;font-variant-numeric:tabular-nums}.dim{color:#6e7781}
.warnings li{color:#9a6700;margin:4px 0}pre{background:#f6f8fa;padding:12px;overflow:auto;font-size:.85em}
.calc{margin-top:10px;padding-top:8px;border-top:1px solid #d0d7de}.calc input{width:7em}
.headline{font-size:1.3em;font-weight:600;margin:.3em 0}.how{color:#57606a;margin:.2em 0 .4em}
@media print{
  @page{size:A4;margin:12mm}
  body{max-width:none;padding:0;font-size:10pt}
  *{-webkit-print-color-adjust:exact;print-color-adjust:exact}
  .modebar-container,.calc{display:none!important}
  .verdict{background:none}
  h2{break-after:avoid}
  section.figure,.js-plotly-plot,table.grid tr,.verdict{break-inside:avoid}
  pre{white-space:pre-wrap;font-size:8pt}
}
"""

#: Plotly sizes figures to the window; a printed page is narrower, so figures are re-laid out
#: for printing and back afterwards ("Save as PDF" gives whole figures, not cut ones).
PRINT_SCRIPT = """<script>
(function () {
  function plots() { return Array.prototype.slice.call(document.querySelectorAll('.js-plotly-plot')); }
  var opened = [];
  window.addEventListener('beforeprint', function () {
    plots().forEach(function (p) { Plotly.relayout(p, {width: 700}); });
    opened = Array.prototype.filter.call(document.querySelectorAll('details'), function (d) { return !d.open; });
    opened.forEach(function (d) { d.open = true; });  // a printout shows what a click would
  });
  window.addEventListener('afterprint', function () {
    plots().forEach(function (p) { Plotly.relayout(p, {width: null, autosize: true}); Plotly.Plots.resize(p); });
    opened.forEach(function (d) { d.open = false; });
  });
})();
</script>"""


def render_html(analysis: Analysis) -> str:
    """The whole report as one HTML string (plotly.js inlined once)."""
    has_data = any(lv.status != "no_data" for lv in analysis.levels)
    figures = []
    if has_data:
        figures = [
            ("Latency against concurrency", latency_figure(analysis),
             "Each point is a level; a point above its dashed SLO line fails it. Lines: percentiles per level. Shaded: the confidence interval of each percentile an SLO uses "
             "(blocks of time resampled; its level is in the checks table). "
             "Dashed horizontal: SLO limits. Green dashed: capacity; red dotted: first failing level."),
        ]
        if has_classes(analysis):
            figures.append(("Per request class", class_figure(analysis),
                            "Each class is judged by its own SLO; a level holds only if every class does. "
                            "The class whose curve crosses its own dashed limit first binds the capacity."))
        if has_turns(analysis):
            figures.append(("TTFT by conversation turn", turn_figure(analysis),
                            "Later turns resend the history (earlier prompts and the answers streamed), "
                            "so their prefill is longer."))
        figures += [
            ("Throughput and goodput", throughput_figure(analysis),
             "Goodput counts only requests that met every per-request limit; the gap to requests/s is "
             "traffic that was served too slowly to count."),
            ("Latency against throughput", knee_figure(analysis),
             "Each point is a level, placed by the tokens/s it delivered and its latency. The knee: beyond it, "
             "more users add latency but few tokens/s."),
            ("Distributions", distribution_figure(analysis),
             "One box per level: the line is the median, the box the middle half of the samples, the whiskers "
             "the spread; a box that climbs and widens from level to level is a queue forming."),
        ]
    figures.append(("Timeline", timeline_figure(analysis),
                    "Grey steps: the users in force (right axis); blue: requests started per second; red bars: "
                    "failed requests. Shaded spans are warmups, not measured."))
    body = [f"<h1>{_e(analysis.name or 'Load test')}: capacity report</h1>", _header(analysis)]
    body.append("<h2>Per level</h2>" + _levels_table(analysis))
    from loadtest.report.why_html import why_section

    body.append(why_section(analysis))
    for title, fig, note in figures:
        how = f"<p class='how'><b>How to read this:</b> {_e(note)}</p>" if note else ""
        body.append(f"<section class='figure'><h2>{_e(title)}</h2>{how}{_figure_html(fig)}</section>")
    if has_data:
        from loadtest.report.server_view import server_section

        body.append("<h2>Server view</h2>" + server_section(analysis, _figure_html))
    body.append("<h2>Errors (measured windows)</h2>" + _errors_section(analysis))
    body.append("<h2>Warnings</h2>" + _warnings_section(analysis))
    body.append("<h2>Scenario</h2>" + _scenario_section(analysis))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(analysis.name or 'loadtest')}: capacity report</title>"
        f"<style>{STYLE}</style>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script>"
        "</head><body>" + "\n".join(body) + PRINT_SCRIPT + "</body></html>\n"
    )


def write_html(run_dir: Path | str, analysis: Analysis) -> Path:
    """Write ``report.html`` atomically into the run folder."""
    from loadtest.records import replace_text

    path = Path(run_dir) / REPORT_HTML
    # Error messages and URLs must hold no secret; plotly's own bundle is left as it is.
    bundle = get_plotlyjs()
    replace_text(path, bundle.join(scrub(part) for part in render_html(analysis).split(bundle)))
    return path



# -- shared with loadtest.compare (its pages look and load like this one) ---------------------

#: Public names for the helpers other pages reuse.
figure_html = _figure_html
rgba = _rgba
page_style = STYLE

