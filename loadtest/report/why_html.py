"""report.html's "What limits it, and what it costs" section: why the capacity stops there, the decode fit, each level's bound, the cost.

Reads the same dicts summary.json writes (:func:`loadtest.report.why.why`,
:func:`loadtest.analysis.run_cost.run_cost`), so the page and the JSON agree.
Plain HTML (no script), beside the replicas calculator's numbers.
"""

from __future__ import annotations

import html
from typing import Any

from loadtest.analysis.capacity_limit import capacity_limit
from loadtest.analysis.run_cost import run_cost
from loadtest.report.why import capacity_bound_words, usd, why


def _money(value: Any) -> str:
    return "—" if value is None else f"${value:,.2f}"


def _unit_prices(cost: dict[str, Any], unary: bool) -> list[tuple[str, str]]:
    """The cost's unit prices. A unary run (embeddings, rerank, score) has no output tokens: its
    rows are per million input tokens and per thousand requests, in cents' digits, not "—"."""
    if unary:
        return [(label, "—" if cost.get(key) is None else usd(cost[key])) for label, key in (
            ("$ per million input tokens", "usd_per_million_tokens"),
            ("$ per thousand requests", "usd_per_thousand_requests"))]
    return [
        ("$ per million output tokens", _money(cost.get("usd_per_million_output_tokens"))
         + (f" (on all successful tokens, ignoring the SLO: {_money(cost.get('usd_per_million_output_tokens_throughput'))})"
            if cost.get("usd_per_million_output_tokens_throughput") is not None else "")),
        ("$ per million tokens (prompt + output)", _money(cost.get("usd_per_million_tokens"))),
        ("$ per thousand requests", _money(cost.get("usd_per_thousand_requests"))),
    ]


def _cost_block(cost: dict[str, Any], unary: bool = False) -> str:
    rows = [
        ("Price", f"{_money(cost['usd_per_hour'])} per replica-hour"),
        *_unit_prices(cost, unary),
    ]
    out = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    parts = [
        "<p class='how'>Counted on goodput at capacity: only requests that met every per-request limit are "
        "worth their price, so a fast server that misses its SLO is not cheap.</p>",
        f"<table class='facts'>{out}</table>",
    ]
    if cost.get("note"):
        parts.append(f"<p>{html.escape(cost['note'])}</p>")
    fc = cost.get("forecast")
    if fc:
        unit = "peak concurrent users" if fc["unit"] == "users" else "peak requests/s"
        hours = "".join(f"<td>{n}</td>" for n in fc["replicas_by_hour"])
        parts.append(
            f"<p><b>Forecast</b>: {fc['peak']:g} {unit}, {fc['per_replica']:.2f} per replica after a "
            f"{fc['headroom']:.0%} autoscaling headroom: {fc['peak_replicas']} replicas at the peak. "
            f"Autoscaled {_money(fc['monthly_usd_autoscaled'])} a month against "
            f"{_money(fc['monthly_usd_static'])} for a static fleet sized for the peak "
            f"({fc['autoscaling_saving']:.0%} less).</p>"
            "<table class='levels'><tr><th>hour (UTC)</th>" + "".join(f"<th>{h}</th>" for h in range(24))
            + f"</tr><tr><th>replicas</th>{hours}</tr></table>"
        )
    return "\n".join(parts)


def why_section(analysis: Any) -> str:
    """The section's HTML ('' when there is neither a fit nor a price)."""
    fit, bounds = why(analysis)
    cost = run_cost(analysis)
    limit = capacity_limit(analysis)
    if fit is None and cost is None and limit is None:
        return ""
    parts = ["<section id='why'><h2>What limits it, and what it costs</h2>"]
    if limit is not None:
        parts.append(f"<p class='headline'>Why it stops there: {html.escape(limit['sentence'])}.</p>")
    if fit is not None:
        parts.append(f"<p class='headline'>{html.escape(fit['sentence'])}</p>")
        if fit.get("bound_at_capacity"):
            parts.append(f"<p>At capacity the decode step is <b>{html.escape(capacity_bound_words(fit))}</b>"
                         f" (read from the {html.escape(fit['basis'])}).</p>")
        rows = []
        for lv in sorted(analysis.levels, key=lambda lv: lv.concurrency):
            b = bounds.get(lv.index)
            if b is None:
                continue
            eff = b.get("efficiency")
            rows.append(
                f"<tr><td>{lv.concurrency}</td><td>{b['sequences']:g}</td><td>{lv.itl_ms.p50:.2f}</td>"
                f"<td>{html.escape(b['bound'])}</td><td>{html.escape(b['basis'])}</td>"
                f"<td>{'—' if eff is None else format(eff, '.0%')}</td></tr>"
            )
        parts.append(
            "<table class='levels'><tr><th>users</th><th>sequences</th><th>ITL p50 ms</th><th>bound</th>"
            "<th>read from</th><th>efficiency</th></tr>" + "".join(rows) + "</table>"
        )
    if cost is not None:
        parts.append("<h3 id='cost'>Cost</h3>" + _cost_block(cost, analysis.unary))
    parts.append("</section>")
    return "\n".join(parts)
