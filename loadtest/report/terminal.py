"""The terminal summary: one row per level and the capacity in one sentence.

Each latency column shows the percentile the SLO uses for that metric (p95
when none), coloured by that check's verdict: green pass, yellow uncertain,
red fail. So the eye finds the binding constraint without reading numbers.
"""

from __future__ import annotations

import math

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from loadtest.analysis.capacity import fmt_ms
from loadtest.analysis.results import Analysis, Check, LevelResult
from loadtest.analysis.slo import METRIC_LABELS

COLOURS = {"pass": "green", "uncertain": "yellow", "fail": "bold red", "no_data": "dim"}
CAPACITY_COLOURS = {
    "found": "bold green",
    "at_least": "bold green",
    "below_minimum": "bold red",
    "uncertain": "bold yellow",
    "client_saturated": "bold yellow",
    "no_data": "bold red",
}

_WORST = {"fail": 3, "uncertain": 2, "no_data": 1, "pass": 0}


def _column_percentile(analysis: Analysis, metric: str) -> str:
    checks = [c for c in analysis.slo.checks if c.metric == metric]
    return checks[0].percentile if checks else "p95"


def _worst(checks: list[Check]) -> str | None:
    if not checks:
        return None
    return max((c.verdict for c in checks), key=_WORST.__getitem__)


def _latency_cell(level: LevelResult, metric: str, percentile: str) -> Text:
    stats = level.metric(metric)
    value = stats.percentile(percentile)
    if stats.n == 0 or math.isnan(value):
        return Text("–", style="dim")
    text = "∞" if math.isinf(value) else fmt_ms(value)
    verdict = _worst([c for c in level.checks if c.metric == metric])
    return Text(text, style=COLOURS.get(verdict or "", ""))


def _errors_cell(level: LevelResult) -> Text:
    if not level.requests:
        return Text("–", style="dim")
    pct = f"{level.error_rate:.0%}" if level.error_rate >= 0.1 else f"{level.error_rate:.1%}"
    text = f"{level.errors} ({pct})" if level.errors else "0"
    verdict = _worst([c for c in level.checks if c.metric == "error_rate"])
    return Text(text, style=COLOURS.get(verdict or "", ""))


def _verdict_cell(level: LevelResult) -> Text:
    text = Text(level.status.replace("_", " "), style=COLOURS.get(level.status, ""))
    if level.client_saturated:
        text.append(" ⚠ client saturated", style="yellow")
    return text


def _rate(value: float, fmt: str) -> str:
    return "–" if value is None or math.isnan(value) else format(value, fmt)


def build_table(analysis: Analysis) -> Table:
    table = Table(
        title=f"{analysis.name or 'run'}: per level (latency in ms, ITL per token)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("users", justify="right", no_wrap=True)
    table.add_column("reqs", justify="right", no_wrap=True)
    table.add_column("errors", justify="right", no_wrap=True)
    percentiles = {}
    for metric in ("ttft_ms", "itl_ms", "tpot_ms"):
        percentiles[metric] = _column_percentile(analysis, metric)
        table.add_column(f"{METRIC_LABELS[metric]} {percentiles[metric]}", justify="right", no_wrap=True)
    table.add_column("tok/s", justify="right", no_wrap=True)
    table.add_column("good/s", justify="right", no_wrap=True)
    table.add_column("ran", justify="right", no_wrap=True)
    table.add_column("verdict", min_width=4, no_wrap=True)
    capacity = analysis.capacity.concurrency
    for level in analysis.levels:
        users = Text(str(level.concurrency) + (" r" if level.refine else ""))
        if capacity is not None and level.concurrency == capacity:
            users.stylize("bold")
        table.add_row(
            users,
            str(level.requests),
            _errors_cell(level),
            *(_latency_cell(level, m, percentiles[m]) for m in ("ttft_ms", "itl_ms", "tpot_ms")),
            _rate(level.output_tokens_per_s, ".0f"),
            _rate(level.goodput_rps, ".2f"),
            ran_cell(level.decision),
            _verdict_cell(level),
        )
    return table


def describe_ending(decision: dict) -> str:
    """``"decided pass early"``, ``"extended until decided: fail"``, ``"still undecided at the limit: …"``."""
    ended, verdict, why = decision.get("ended"), decision.get("verdict"), decision.get("why", "")
    if ended == "decided_early":
        return f"{verdict}, decided early"
    if ended == "decided_after_extension":
        return f"{verdict}, decided after running longer"
    if ended == "undecided_at_max":
        return f"still undecided at max_level_duration_s ({why})"
    if ended == "decided":
        return str(verdict)
    return str(ended)


#: How a level's length is marked: ended early once decided, or run past level_duration_s.
RAN_MARKS = {"decided_early": " <", "decided_after_extension": " +", "undecided_at_max": " +?"}


def ran_cell(decision: dict) -> str:
    """Seconds the level ran, marked ``<`` (ended early, decided), ``+`` (extended) or ``+?`` (still undecided)."""
    ran = decision.get("ran_s") if decision else None
    if ran is None:
        return "-"
    return f"{ran:.0f}s{RAN_MARKS.get(str(decision.get('ended')), '')}"


def print_summary(analysis: Analysis, console: Console | None = None) -> None:
    """Print the level table, the capacity sentence and any warnings."""
    console = console or Console()
    console.print(build_table(analysis))
    cap = analysis.capacity
    console.print(Text(cap.message, style=CAPACITY_COLOURS.get(cap.verdict, "")))
    if any(lv.refine for lv in analysis.levels):
        console.print(Text("r = refine level (bisection between the last pass and the first fail)", style="dim"))
    if any(lv.decision.get("ended") in RAN_MARKS for lv in analysis.levels):
        console.print(
            Text("ran: < ended early once decided, + run longer until decided, +? still undecided at the limit", style="dim")
        )
    scaling = analysis.autoscaling
    if scaling is not None and scaling.capacity is not None:
        console.print(Text(f"autoscaling: {scaling.paragraph}"))
    for warning in analysis.warnings:
        console.print(Text(f"warning: {warning}", style="yellow"))
