"""``compare.html``: the baseline's and the candidate's curves overlaid, regressions marked.

One self-contained page (plotly.js inlined once, like ``report.html``, whose
plotting helpers it shares): the verdict and warnings first, then one panel
per compared metric against the level (concurrent users, or a rate run's offered rate or trace
speedup; each run's value with its interval band),
the candidate's regressed points marked with a red ×, inconclusive ones with
an amber ◇, then the table of every check.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from loadtest.analysis.capacity import confidence_pct
from loadtest.compare.change import fmt_change, shown_verdict
from loadtest.compare.engine import Comparison
from loadtest.compare.level_keys import AXIS_TITLE, USERS, LevelKey, level_key
from loadtest.compare.noise import fmt_band, fmt_interval
from loadtest.compare.outputs import reference_runs_text, runs_text, write_text
from loadtest.compare.rules import COMPLETED_SHARE, ERROR_RATE, THROUGHPUT, split_class
from loadtest.compare.summary_values import completed_share, scoped
from loadtest.report.page import PAGE_STYLE as page_style
from loadtest.report.page import esc as _e
from loadtest.report.plotting import figure_html, rgba, summaries_ci_label


BASELINE_COLOUR = "#6e7781"
CANDIDATE_COLOUR = "#2f81f7"
OUTCOME_COLOURS = {"regression": "#cf222e", "inconclusive": "#9a6700", "pass": "#1a7f37"}


def _finite(values: Iterable[Any]) -> list[float | None]:
    out: list[float | None] = []
    for v in values:
        out.append(float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None)
    return out


def _series(summary: Mapping[str, Any], check: str) -> tuple[list[LevelKey], list, list, list]:
    """x (the level's key: users, or a rate's req/s or speedup), value, CI low, CI high of one check
    across a run's levels (from its summary)."""
    levels = sorted((lv for lv in summary.get("levels") or [] if lv.get("status") != "no_data"
                     and level_key(lv) is not None), key=level_key)  # type: ignore[arg-type]
    xs: list[LevelKey] = [level_key(lv) for lv in levels]  # type: ignore[misc]
    if check == THROUGHPUT:
        ys = [lv.get(THROUGHPUT) for lv in levels]
        return xs, _finite(ys), [None] * len(xs), [None] * len(xs)
    if check == COMPLETED_SHARE:
        return xs, _finite(completed_share(lv) * 100 for lv in levels), [None] * len(xs), [None] * len(xs)
    if check == ERROR_RATE:
        ys = [(lv.get("error_rate") or 0) * 100 for lv in levels]
        ci = [lv.get("error_rate_ci") or [None, None] for lv in levels]
        return xs, _finite(ys), _finite((c[0] or 0) * 100 for c in ci), _finite((c[1] or 0) * 100 for c in ci)
    scoped_levels = [scoped(lv, check) for lv in levels]  # a request class's check: its entry at each level
    metric, _, pct = (scoped_levels[0][1] if scoped_levels else check).partition(".")
    stats = [own.get(metric) or {} for own, _ in scoped_levels]
    ci = [(s.get("ci") or {}).get(pct) or [None, None] for s in stats]
    return xs, _finite(s.get(pct) for s in stats), _finite(c[0] for c in ci), _finite(c[1] for c in ci)


def overlay_figure(cmp: Comparison) -> go.Figure:
    checks = list(dict.fromkeys(c.check for c in cmp.changes if c.level is not None))
    if not checks:
        return go.Figure()
    cols = 2 if len(checks) > 1 else 1
    rows = math.ceil(len(checks) / cols)
    titles = [_title(c) for c in checks]
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.08,
                        vertical_spacing=0.5 / max(rows, 1))
    for i, check in enumerate(checks):
        row, col = i // cols + 1, i % cols + 1
        for side, colour, name in ((cmp.baseline, BASELINE_COLOUR, "baseline"), (cmp.candidate, CANDIDATE_COLOUR, "candidate")):
            xs, ys, lo, hi = _series(side.summary, check)
            if any(v is not None for v in hi):
                fig.add_trace(go.Scatter(x=xs, y=hi, mode="lines", line=dict(width=0), showlegend=False,
                                         hoverinfo="skip", legendgroup=name), row=row, col=col)
                fig.add_trace(go.Scatter(x=xs, y=lo, mode="lines", line=dict(width=0), fill="tonexty",
                                         fillcolor=rgba(colour, 0.18), showlegend=False, hoverinfo="skip",
                                         legendgroup=name), row=row, col=col)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=name, legendgroup=name,
                                     line=dict(color=colour), showlegend=i == 0), row=row, col=col)
        for verdict, symbol, colour in (("regression", "x", "#cf222e"), ("inconclusive", "diamond-open", "#9a6700")):
            marked = [c for c in cmp.changes if c.check == check and c.verdict == verdict and c.level is not None]
            if not marked:
                continue
            xs, ys, _, _ = _series(cmp.candidate.summary, check)
            at = dict(zip(xs, ys))
            fig.add_trace(
                go.Scatter(x=[c.level for c in marked], y=[at.get(c.level) for c in marked], mode="markers",
                           marker=dict(symbol=symbol, size=14, color=colour, line=dict(width=3)),
                           name=verdict, legendgroup=verdict, showlegend=not any(
                               t.name == verdict for t in fig.data),
                           text=[c.message for c in marked], hoverinfo="text"),
                row=row, col=col,
            )
        fig.update_xaxes(title_text=AXIS_TITLE[cmp.unit], row=row, col=col)
    against = "concurrency" if cmp.unit == USERS else "the " + AXIS_TITLE[cmp.unit].partition(" (")[0]
    fig.update_layout(height=320 * rows + 80, title=f"Baseline and candidate against {against}")
    return fig


def _title(check: str) -> str:
    if check == THROUGHPUT:
        return "throughput (output tokens/s)"
    if check == ERROR_RATE:
        return "error rate (%)"
    if check == COMPLETED_SHARE:
        return "completed share of the sends (%)"
    name, plain = split_class(check)
    metric, _, pct = plain.partition(".")
    return (f"{name}: " if name else "") + f"{pct} {metric.removesuffix('_ms').upper()} (ms)"


def _checks_table(cmp: Comparison) -> str:
    """Every check; with a history, its within-run interval and run-to-run noise side by side."""
    noise = any(c.noise_ci is not None for c in cmp.changes)
    rows = []
    for c in cmp.changes:
        colour = {"regression": "#cf222e", "inconclusive": "#9a6700", "improvement": "#1a7f37"}.get(c.verdict, "#57606a")
        gate = "fails the gate" if c.fails_gate else ("holds the gate" if c.holds_gate else "")
        sides = (f"<td class='num'>{_e(fmt_interval(c.within_ci, c.relative))}</td>"
                 f"<td class='num'>{_e(fmt_band(c.noise_ci, c.relative))}</td>") if noise else ""
        rows.append(
            f"<tr><td>{_e(c.name)}</td><td style='color:{colour};font-weight:600'>{_e(shown_verdict(c))}</td>"
            f"<td class='num'>{_e(fmt_change(c))}</td>{sides}<td>{_e(gate)}</td><td>{_e(c.message)}</td></tr>"
        )
    head = "<th>within-run interval</th><th>run-to-run noise</th>" if noise else ""
    return ("<table class='grid'><tr><th>check</th><th>verdict</th><th>change [CI]</th>" + head + "<th>gate</th>"
            "<th>detail</th></tr>" + "".join(rows) + "</table>")


def render_compare_html(cmp: Comparison) -> str:
    colour = OUTCOME_COLOURS[cmp.outcome]
    b, c = cmp.baseline, cmp.candidate
    body = [
        f"<h1>{_e(c.name or 'loadtest')}: baseline vs candidate</h1>",
        f"<div class='verdict' style='border-color:{colour}'><div class='message'>{_e(cmp.headline)}</div>"
        f"<div class='dim'>exit code {cmp.exit_code}; {confidence_pct(cmp.confidence)} bootstrap intervals (requests "
        f"resampled); tolerance {cmp.rules.tolerance * 100:g}%</div></div>",
        "<table class='facts'>"
        # a group (run --repeat) by all its runs, as the Markdown and the terminal name it
        f"<tr><th>baseline</th><td>{_e(runs_text(b.label, cmp.baselines))}: capacity {_e(b.bounds.text_at_a_rate())}</td></tr>"
        f"<tr><th>candidate</th><td>{_e(runs_text(c.label, cmp.candidates))}: capacity {_e(c.bounds.text_at_a_rate())}</td></tr>"
        f"<tr><th>workload</th><td>fingerprint {_e(cmp.fingerprint.get('hash'))}</td></tr>"
        f"<tr><th>run-to-run noise</th><td>{_e(reference_runs_text(cmp))}</td></tr></table>",
    ]
    if cmp.cost:
        body.append(f"<h2 id='cost'>Cost</h2><p>{_e(cmp.cost['sentence'])}</p>")
    if cmp.warnings:
        body.append("<h2>Warnings</h2><ul class='warnings'>" + "".join(f"<li>{_e(w)}</li>" for w in cmp.warnings) + "</ul>")
    if any(ch.level is not None for ch in cmp.changes):
        bands = summaries_ci_label([b.summary, c.summary])  # as each side was analyzed (its summary's confidence)
        body.append(f"<h2>Curves</h2><p class='dim'>Grey: baseline; blue: candidate; bands: each run's {bands}. "
                    "Red ×: regression; amber ◇: inconclusive.</p>" + figure_html(overlay_figure(cmp)))
    body.append("<h2>Every check</h2>" + _checks_table(cmp))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(c.name or 'loadtest')}: compare</title><style>{page_style}</style>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        + "\n".join(body) + "</body></html>\n"
    )


def write_compare_html(path, cmp: Comparison):
    return write_text(path, render_compare_html(cmp))
