"""The terminal summary: one row per level and the capacity in one sentence.

Each latency column shows a percentile the SLO judges for that metric (p95
when none; one column per judged percentile), and every metric an SLO judges
has its columns, coloured by that check's verdict: green pass, yellow
uncertain, red fail. So the eye finds the binding constraint, and its value.
"""

from __future__ import annotations

import math
import sys

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from loadtest.analysis.capacity import fmt_ms
from loadtest.analysis.failures import errors_line
from loadtest.analysis.keep_up import behind_legend, no_queue_legend
from loadtest.analysis.results import Analysis, Check, LevelResult
from loadtest.metric_registry import BY_NAME, LATENCY_METRICS, names
from loadtest.report.why import limits_line

#: The latency columns of the per-level table and of the per-class table (the registry's flags).
TERMINAL_METRICS = names(terminal=True)
CLASS_METRICS = names(per_class=True)
#: The columns of a request kind that is not streamed: no first token, no token gaps.
UNARY_METRICS = names(kind="latency", unary=True)

COLOURS = {"pass": "green", "uncertain": "yellow", "fail": "bold red", "no_data": "dim"}
CAPACITY_COLOURS = {
    "found": "bold green",
    "at_least": "bold green",
    "below_minimum": "bold red",
    "uncertain": "bold yellow",
    "client_saturated": "bold yellow",
    "host_contended": "bold yellow",
    "no_data": "bold red",
}

_WORST = {"fail": 3, "uncertain": 2, "no_data": 1, "pass": 0}


def latency_columns(analysis: Analysis) -> list[tuple[str, str]]:
    """The per-level table's latency columns, as (metric, percentile): each shown metric at every
    percentile its SLO judges (p95 when none), then every other metric an SLO judges.

    Why the second part: ``analyze --slo e2e_ms.p99=400`` judged every level on e2e, and the table
    had no e2e column; the value that decided the verdict was nowhere on the screen.
    """
    shown = UNARY_METRICS if analysis.unary else TERMINAL_METRICS
    judged: dict[str, list[str]] = {}
    for check in analysis.slo.checks:
        if check.percentile not in judged.setdefault(check.metric, []):
            judged[check.metric].append(check.percentile)
    extra = [m for m in LATENCY_METRICS if m in judged and m not in shown]
    return [(m, pct) for m in (*shown, *extra) for pct in (judged.get(m) or ["p95"])]


def _judged(analysis: Analysis, metric: str, percentile: str) -> bool:
    """Does an SLO judge this percentile (its cell then takes that check's colour alone)?"""
    return any(c.metric == metric and c.percentile == percentile for c in analysis.slo.checks)


def _worst(checks: list[Check]) -> str | None:
    if not checks:
        return None
    return max((c.verdict for c in checks), key=_WORST.__getitem__)


def _latency_cell(
    level: LevelResult, metric: str, percentile: str, *, same_percentile: bool = False, class_name: str | None = None
) -> Text:
    """The value, coloured by the metric's checks (only the shown percentile's, if asked).

    With request classes a level also holds each class's checks; only those of
    ``class_name`` (None: the level's own) colour the cell.
    """
    stats = level.metric(metric)
    value = stats.percentile(percentile)
    if stats.n == 0 or math.isnan(value):
        return Text("–", style="dim")
    text = "∞" if math.isinf(value) else fmt_ms(value)
    verdict = _worst([
        c for c in level.checks
        if c.metric == metric and c.class_name == class_name and (not same_percentile or c.percentile == percentile)
    ])
    return Text(text, style=COLOURS.get(verdict or "", ""))


def _errors_cell(level: LevelResult, class_name: str | None = None) -> Text:
    if not level.requests:
        return Text("–", style="dim")
    pct = f"{level.error_rate:.0%}" if level.error_rate >= 0.1 else f"{level.error_rate:.1%}"
    text = f"{level.errors} ({pct})" if level.errors else "0"
    verdict = _worst([c for c in level.checks if c.metric == "error_rate" and c.class_name == class_name])
    return Text(text, style=COLOURS.get(verdict or "", ""))


def _verdict_cell(level: LevelResult) -> Text:
    text = Text(level.status.replace("_", " "), style=COLOURS.get(level.status, ""))
    if level.client_saturated:
        text.append(" ⚠ within client error" if level.client_near_limit else " ⚠ client saturated", style="yellow")
    if level.host_contended:
        text.append(" ⚠ host busy", style="yellow")
    return text


def _rate(value: float, fmt: str) -> str:
    return "–" if value is None or math.isnan(value) else format(value, fmt)


def build_table(analysis: Analysis) -> Table:
    """The per-level table; a unary run's (embeddings, rerank, score) has e2e and TTFB, input tok/s
    and items/s instead of a stream's TTFT, ITL, TPOT and output tok/s, and no word on ITL's unit."""
    unary = analysis.unary
    table = Table(
        title=f"{analysis.name or 'run'}: per level (latency in ms{'' if unary else ', ITL per token'})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    open_loop = any(lv.rate_rps is not None for lv in analysis.levels)
    replay = any(lv.speedup is not None for lv in analysis.levels)  # trace replay: the speedup names the level
    if replay:
        table.add_column("speedup", justify="right", no_wrap=True)
    table.add_column("req/s" if open_loop else "users", justify="right", no_wrap=True)
    if open_loop:
        table.add_column("sent/done", justify="right", no_wrap=True)
        table.add_column("lag p99", justify="right", no_wrap=True)
    table.add_column("reqs", justify="right", no_wrap=True)
    table.add_column("errors", justify="right", no_wrap=True)
    columns = latency_columns(analysis)
    for metric, percentile in columns:
        table.add_column(f"{BY_NAME[metric].short_label} {percentile}", justify="right", no_wrap=True)
    table.add_column("in tok/s" if unary else "tok/s", justify="right", no_wrap=True)
    if unary:
        table.add_column("items/s", justify="right", no_wrap=True)
    table.add_column("good/s", justify="right", no_wrap=True)
    structured = any(lv.valid_output_rate is not None for lv in analysis.levels)  # tools / response_format
    if structured:
        table.add_column("valid", justify="right", no_wrap=True)
    table.add_column("ran", justify="right", no_wrap=True)
    table.add_column("verdict", min_width=4, no_wrap=True)
    capacity = analysis.capacity.rate_rps if open_loop else analysis.capacity.concurrency
    for level in analysis.levels:
        users = Text(level.load_text + (" r" if level.refine else ""))
        if capacity is not None and level.load == capacity:
            users.stylize("bold")
        # A level without a measured request (a run stopped as it began) has, at most, figures of
        # requests the stop cut and of the previous level's ending: not this load's, so not shown
        # beside "no data" (the report leaves such levels out too; summary.json keeps them).
        shown = level.status != "no_data"
        table.add_row(
            *((f"{level.speedup:g}×",) if replay else ()),
            users,
            *(_open_loop_cells(level) if open_loop else ()),
            str(level.requests),
            _errors_cell(level),
            *((_latency_cell(level, m, pct, same_percentile=_judged(analysis, m, pct)) if shown
               else Text("–", style="dim")) for m, pct in columns),
            *(((_rate(level.input_tokens_per_s, ".0f"), _rate(level.items_per_s, ".1f")) if unary
               else (_rate(level.output_tokens_per_s, ".0f"),)) if shown else ("–",) * (2 if unary else 1)),
            _rate(level.goodput_rps if shown else None, ".2f"),
            *((_valid_cell(level),) if structured else ()),
            ran_cell(level.decision),
            _verdict_cell(level),
        )
    return table


def _valid_cell(level: LevelResult) -> Text:
    """The share of valid structured outputs, coloured by the valid-output floor where one is set."""
    if level.valid_output_rate is None:
        return Text("–", style="dim")
    verdict = _worst([c for c in level.checks if c.metric == "valid_output_rate" and c.class_name is None])
    return Text(f"{level.valid_output_rate:.0%}", style=COLOURS.get(verdict or "", ""))


def _open_loop_cells(level) -> tuple[str, str]:
    """Achieved send and completion rates (``!`` when the server fell behind), and the send lag p99."""
    stats = level.open_loop
    if not stats:
        return "-", "-"
    behind = "" if stats["server_kept_up"] else "!"
    behind = behind or ("" if stats.get("keep_up_told", True) else "?")
    lag = stats["schedule_lag_ms"]["p99"]
    return (
        f"{stats['sent_rps']:.1f}/{stats['completed_rps']:.1f}{behind}",
        "-" if lag != lag else f"{lag:.1f}ms",
    )
def build_class_table(analysis: Analysis) -> Table:
    """One row per level and class: each class judged by its own SLO (its percentile, its colour)."""
    table = Table(
        title="per request class (each cell: the percentile the class's SLO uses, else p95)",
        title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
    )
    replay = any(lv.speedup is not None for lv in analysis.levels)
    load = "speedup" if replay else "req/s" if any(lv.rate_rps is not None for lv in analysis.levels) else "users"
    for name, justify in ((load, "right"), ("class", "left"), ("reqs", "right"), ("errors", "right")):
        table.add_column(name, justify=justify, no_wrap=True)
    metrics = CLASS_METRICS
    for metric in metrics:
        table.add_column(BY_NAME[metric].short_label, justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for level in analysis.levels:
        for name, class_level in level.classes.items():
            spec = analysis.class_slos.get(name)
            cells = []
            for metric in metrics:
                check = next((c for c in spec.checks if c.metric == metric), None) if spec else None
                pct = check.percentile if check else "p95"
                cell = _latency_cell(class_level, metric, pct, same_percentile=True, class_name=name)
                cells.append(cell.append(f" {pct}", style="dim") if check else cell)
            table.add_row(
                f"{level.speedup:g}×" if replay else level.load_text, name, str(class_level.requests),
                _errors_cell(class_level, name), *cells,
                _verdict_cell(class_level),
            )
    return table


def _class_capacities(analysis: Analysis) -> str:
    """``each class alone holds: chat 5 (fails at 6 on ttft_ms.p95); batch ≥ 8``, in the run's load:
    users, req/s (open loop) or × the trace window. An open-loop run's classes read "below the lowest
    level" for capacities of 5 req/s: only the users were read."""
    parts = []
    for name, cap in analysis.capacity.classes.items():
        if cap.speedup is not None or cap.first_failing_speedup is not None:
            held_at, failing_at, upper, unit = cap.speedup, cap.first_failing_speedup, cap.upper_bound_speedup, "×"
        elif cap.rate_rps is not None or cap.first_failing_rate_rps is not None:
            held_at, failing_at, upper, unit = cap.rate_rps, cap.first_failing_rate_rps, cap.upper_bound_rate_rps, " req/s"
        else:
            held_at, failing_at, upper, unit = cap.concurrency, cap.first_failing, cap.upper_bound, ""
        held = "below the lowest level" if held_at is None else f"{held_at:g}{unit}"
        if cap.verdict == "uncertain":
            # an undecided level is no failure: "below the lowest level" claimed one the data do not show
            held = "no level with confidence" if held_at is None else f"{held_at:g}{unit} with confidence"
            if upper is not None and upper != held_at:
                held += f", up to {upper:g}{unit} if its undecided levels hold"
        elif failing_at is None and held_at is not None:
            held = f"≥ {held_at:g}{unit}"
        why = f" (fails at {failing_at:g}{unit} on {cap.binding})" if failing_at is not None else ""
        parts.append(f"{name} {held}{why}")
    return "each class alone holds: " + "; ".join(parts)


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


def describe_hold(hold: dict | None) -> str:
    """``"held 1.2 s for 4 requests"`` / ``"held 30 s (cap): 2 cut"``: the level's hold (load/hold.py), or ""."""
    waited = int((hold or {}).get("waited_for") or 0)
    if not hold or (waited == 0 and hold.get("ended") == "drained"):
        return ""  # nothing outlived the window: the next level started at once ("held 0.1 s for 0 requests")
    text = f"held {float(hold.get('held_s') or 0):.1f} s for {waited} request{'' if waited == 1 else 's'}"
    if hold.get("ended") == "cap":
        text += f" (cap): {int(hold.get('censored') or 0)} cut"
    elif hold.get("ended") == "stopped":
        text += " (run stopped)"
    return text


#: How a level's length is marked: ended early once decided, or run past level_duration_s.
RAN_MARKS = {"decided_early": " <", "decided_after_extension": " +", "undecided_at_max": " +?"}


def ran_cell(decision: dict) -> str:
    """Seconds the level ran, marked ``<`` (ended early, decided), ``+`` (extended) or ``+?`` (still undecided)."""
    ran = decision.get("ran_s") if decision else None
    if ran is None:
        return "-"
    return f"{ran:.0f}s{RAN_MARKS.get(str(decision.get('ended')), '')}"


#: Columns of a table printed to a pipe or a CI log (Rich's 80 cut a profile's "bound" cells to "memory_o…").
PIPE_WIDTH = 120


def stdout_console() -> Console:
    """The console a command prints its tables to: the terminal's width, or PIPE_WIDTH columns when
    standard output is not a terminal (a CI log, ``| tee``), so no cell is cut short there."""
    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def print_summary(analysis: Analysis, console: Console | None = None) -> None:
    """Print the level table, the capacity sentence and any warnings."""
    console = console or Console()
    console.print(build_table(analysis))
    if analysis.class_slos:
        console.print(build_class_table(analysis))
        console.print(Text(_class_capacities(analysis), style="dim"))
    cap = analysis.capacity
    console.print(Text(cap.message, style=CAPACITY_COLOURS.get(cap.verdict, "")))
    if any(lv.open_loop and not lv.open_loop["server_kept_up"] for lv in analysis.levels):
        console.print(Text(behind_legend(analysis.levels), style="dim"))
    no_queue = no_queue_legend(analysis.levels)
    if no_queue:
        console.print(Text(no_queue, style="dim"))
    if any(lv.open_loop and not lv.open_loop.get("keep_up_told", True) for lv in analysis.levels):
        console.print(Text("? = too short to tell whether the server kept up: the window held less than a request's "
                           "time in the server after the requests in flight had filled up", style="dim"))
    for lv in analysis.levels:
        if lv.open_loop and lv.open_loop["dropped"]:
            console.print(Text(f"{lv.label}: {lv.open_loop['dropped']} arrivals dropped at load.max_in_flight", style="yellow"))
    if cap.mean_in_flight is not None:
        console.print(Text(f"mean requests in flight at capacity: {cap.mean_in_flight:.1f}"))
    if any(lv.refine for lv in analysis.levels):
        console.print(Text("r = refine level (a --refine probe: where the measured slope crosses a limit, else the midpoint of the bracket; below a failing first level, half of it)", style="dim"))
    if any(lv.decision.get("ended") in RAN_MARKS for lv in analysis.levels):
        console.print(
            Text("ran: < ended early once decided, + run longer until decided, +? still undecided at the limit", style="dim")
        )
    scaling = analysis.autoscaling
    # a capacity in users, or in open loop (and trace replay) a rate to aim for per replica
    if scaling is not None and scaling.paragraph and (
            scaling.capacity is not None or scaling.target_rate_rps_per_replica is not None):
        console.print(Text(f"autoscaling: {scaling.paragraph}"))

    line = limits_line(analysis)
    if line:
        console.print(Text(line))
    failures = errors_line(analysis.requests, sum(lv.requests for lv in analysis.levels))
    if failures:  # what the failures said: the table counts them, the kinds say of what sort, this says why
        console.print(Text(failures))
    for warning in analysis.warnings:
        console.print(Text(f"warning: {warning}", style="yellow"))
