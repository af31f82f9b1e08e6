"""The HTML sections of ``report.html``: the verdict, the per-level tables, errors, warnings, scenario.

Each function returns an HTML fragment; :mod:`loadtest.report.html` puts them
in the reading order of the decision.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any
import yaml

from loadtest.analysis.capacity import ci_label, fmt_ms
from loadtest.analysis.failures import message_groups
from loadtest.analysis.keep_up import behind_without_queue
from loadtest.analysis.open_loop import KEEP_UP
from loadtest.analysis.results import Analysis, LevelResult, fmt_rate
from loadtest.analysis.slo import SloSpec
from loadtest.analysis.verdict import SUSTAINED_CHECK
from loadtest.report.calculator import replicas_calculator
from loadtest.report.page import esc as _e
from loadtest.report.plotting import STATUS_COLOURS, VERDICT_COLOURS, load_words
from loadtest.metric_registry import BY_NAME, LATENCY_METRICS, METRICS
from loadtest.report.terminal import describe_ending, describe_hold

#: The latency cells of the per-level table: (metric, percentile), from the registry's ``report_table``;
#: a unary run (embeddings, rerank, score) keeps those it measures (a stream's would be columns of dashes).
_TABLE_CELLS = [(m, pct) for m in METRICS for pct in m.report_table]
_UNARY_CELLS = [(m, pct) for m, pct in _TABLE_CELLS if m.unary]
#: The per-level table's throughput columns (heading, LevelResult attribute, format): a stream's
#: output tokens; a unary answer has none (0 tok/s), its throughput is what it was sent.
_RATE_COLUMNS = {
    False: (("tok/s", "output_tokens_per_s", ".0f"),),
    True: (("input tok/s", "input_tokens_per_s", ".0f"), ("items/s", "items_per_s", ".1f")),
}


def header(analysis: Analysis) -> str:
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
        big = f"{'≥ ' if cap.verdict == 'at_least' else ''}{fmt_rate(cap.rate_rps)} requests/s"
        if cap.mean_in_flight is not None:
            big += f" (mean {cap.mean_in_flight:.1f} in flight)"
    elif cap.concurrency is None:
        big = "below the lowest level" if cap.verdict in ("below_minimum", "client_saturated", "host_contended") else "unknown"
    elif cap.verdict == "at_least":
        big = f"≥ {cap.concurrency} concurrent users"
    else:
        big = f"{cap.concurrency} concurrent users"
    sources = ", ".join(f"{k} ({v} requests)" for k, v in analysis.token_source.items()) or "unknown"
    slo = _slo_words(analysis.slo) or "none defined"
    for name, spec in analysis.class_slos.items():
        slo += f"; class {name}: " + (_slo_words(spec) or "none")
    facts = [
        ("Verdict", cap.verdict.replace("_", " ")),
        ("Binding SLO", (f"{cap.binding_class}: " if cap.binding_class and cap.binding else "") + _binding_at(cap)),
        ("At capacity", _at_capacity(cap, analysis.autoscaling.replicas if analysis.autoscaling else None,
                                     analysis.unary)),
        ("Target", f"{target.get('model', '?')} · {target.get('base_url', '?')} · {target.get('api', '?')}"),
        ("SLOs", slo),
        ("Date", date),
        ("Token counts", sources),
    ]
    if analysis.prompt_length is not None:  # what the scenario asked for against what the server counted
        facts.append(("Prompt tokens", analysis.prompt_length.words()))
    if not analysis.unary:  # an answer in one body has no gaps between tokens to give a unit
        facts.append(("ITL unit", "per token (a chunk's gap is spread over its tokens)"))
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    return f"""
<section class="verdict" style="border-color:{colour}">
  <p class="headline" id="headline">{_e(plain_verdict(analysis))}</p>
  <div class="cap" style="color:{colour}">Capacity: {_e(big)}</div>
  <p class="message">{_e(cap.message)}</p>
  <table class="facts">{rows}</table>
  {replicas_calculator(analysis)}
</section>"""


def _binding_at(cap: Any) -> str:
    if not cap.binding:
        return "—"
    if cap.first_failing_rate_rps is not None:
        return f"{cap.binding} at {fmt_rate(cap.first_failing_rate_rps)} req/s"
    return f"{cap.binding} at {cap.first_failing} users"


def plain_verdict(analysis: Analysis) -> str:
    """The verdict in plain words, no numbers: what a reader needs before any figure."""
    cap = analysis.capacity
    if cap.verdict == "found":
        words = "The endpoint meets every SLO up to the capacity below"
        more = ("with faster replay" if cap.speedup is not None else "at higher rates" if cap.rate_rps is not None
                else "with more users")  # an open loop or a trace replay has no users to add
        words += f"; {more}, {_binding_words(analysis)} breaks its limit first." if cap.binding else "."
    elif cap.verdict == "at_least":
        words = "The endpoint met every SLO at every level tested: its real limit is higher than this run went."
    elif cap.verdict == "below_minimum":
        words = "The endpoint missed the SLOs even at the lowest level tested: under these SLOs it has no capacity."
    elif cap.verdict == "uncertain" and (stopped := _stopped_undecided(analysis)) is not None:
        words = (f"Not decided: {stopped} stopped the run while a level was still being measured, "
                 "so the capacity is a range (below).")
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


def _stopped_undecided(analysis: Analysis) -> str | None:
    """The stop, in words, when it cut short the undecided level the verdict waits on (else None).

    That level is the lowest that neither passed nor lacks data, as :func:`find_capacity` takes it;
    a level undecided at its last look below it keeps the "too close to their limits" words.
    """
    usable = sorted((lv for lv in analysis.levels if lv.status != "no_data"), key=lambda lv: lv.load)
    blocker = next((lv for lv in usable if lv.status != "pass"), None)
    return blocker.cut_short_by if blocker is not None and blocker.status == "uncertain" else None


def _binding_words(analysis: Analysis) -> str:
    binding = analysis.capacity.binding
    for check in analysis.slo.checks:
        if check.name == binding:
            return f"the {check.label}"
    return "the error rate" if binding and "error" in str(binding) else f"{binding}"


def _at_capacity(cap: Any, replicas: int | None, unary: bool = False) -> str:
    """The traffic served at capacity: the endpoint's, and each replica's share when it is a fleet.

    The figures are the whole endpoint's; calling them "per replica" was right only for one
    replica (a fleet of 2 at 19.9 req/s read "19.9 req/s per replica"). A unary run's throughput
    is input tokens/s and items/s: its output tokens/s is 0, which read as nothing served.
    """
    if cap.requests_per_s is None:
        return "—"
    good = cap.goodput_rps if cap.goodput_rps is not None and math.isfinite(cap.goodput_rps) else None

    def figures(share: float) -> str:
        parts = [f"{cap.requests_per_s / share:.2f} req/s"]
        if unary:
            parts += [f"{_num(_over(cap.input_tokens_per_s, share), '.0f')} input tok/s",
                      f"{_num(_over(cap.items_per_s, share), '.1f')} items/s"]
        else:
            parts.append(f"{cap.output_tokens_per_s / share:.0f} output tok/s")
        if good is not None:
            parts.append(f"goodput {good / share:.2f} req/s")
        return " · ".join(parts)

    if replicas and replicas > 1:
        return f"{figures(1)} for the {replicas} replicas ({figures(replicas)} a replica)"
    return figures(1) + (" (one replica)" if replicas == 1 else "")


def _over(value: float | None, share: float) -> float | None:
    return None if value is None else value / share


def _cell_ms(level: LevelResult, metric: str, pct: str) -> str:
    value = level.metric(metric).percentile(pct)
    if math.isnan(value):
        return "<td class='num dim'>–</td>"
    verdicts = [c.verdict for c in level.checks if c.metric == metric and c.percentile == pct and c.class_name is None]
    style = f" style='color:{STATUS_COLOURS[verdicts[0]]}'" if verdicts else ""
    text = "∞" if math.isinf(value) else fmt_ms(value)
    return f"<td class='num'{style}>{_e(text)}</td>"


def table_cells(analysis: Analysis) -> list[tuple[Any, str]]:
    """The per-level table's latency cells: the registry's, then every other percentile an SLO judges.

    Why the second part: ``analyze --slo e2e_ms.p99=400`` judged every level on a value the table had
    no column for (the terminal's table says the same: :func:`loadtest.report.terminal.latency_columns`).
    """
    cells = list(_UNARY_CELLS if analysis.unary else _TABLE_CELLS)
    for check in analysis.slo.checks:
        cell = (BY_NAME.get(check.metric), check.percentile)
        if check.metric in LATENCY_METRICS and cell not in cells:
            cells.append(cell)
    return cells


def levels_table(analysis: Analysis) -> str:
    # the level's rate as asked (the offered rate measured in its window is the open-loop table's)
    unit = "rate (req/s)" if any(lv.rate_rps is not None for lv in analysis.levels) else "users"
    cells, rates = table_cells(analysis), _RATE_COLUMNS[analysis.unary]
    head = (
        f"<tr><th>{unit}</th><th>requests</th><th>errors</th>"
        + "".join(f"<th>{_e(m.short_label)} {pct}</th>" for m, pct in cells)
        + "<th>req/s</th>" + "".join(f"<th>{_e(name)}</th>" for name, _, _ in rates)
        + "<th>goodput</th><th>spillover</th><th>ran</th><th>verdict</th></tr>"
    )
    rows = []
    for lv in analysis.levels:
        flags = []
        if lv.refine:
            flags.append("refine")
        if lv.client_saturated:
            flags.append("within the client's timing error" if lv.client_near_limit else "client saturated")
        if lv.host_contended:
            flags.append("host busy")
        err = f"{lv.errors} ({lv.error_rate:.1%})" if lv.requests else "–"
        rows.append(
            "<tr>"
            f"<td class='num'>{lv.load_text}</td><td class='num'>{lv.requests}</td><td class='num'>{_e(err)}</td>"
            + "".join(_cell_ms(lv, m.name, pct) for m, pct in cells)
            + f"<td class='num'>{_num(lv.requests_per_s, '.2f')}</td>"
            + "".join(f"<td class='num'>{_num(getattr(lv, attr), fmt)}</td>" for _, attr, fmt in rates)
            + f"<td class='num'>{_num(lv.goodput_rps, '.2f')}</td><td class='num'>{lv.spillover}</td>"
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
        note = "" if o["server_kept_up"] else (
            f"the server could not keep up: completed below {KEEP_UP:.0%} of the "
            f"{_num(o.get('keep_up_sent_rps'), '.2f')} req/s sent once the requests in flight had filled up")
        if behind_without_queue(o):
            note += "; the server's waiting count stayed 0: no request queued (a burst the window cut, or slower runs in a fuller batch)"
        note = note or ("" if o.get("keep_up_told", True) else "too short to tell whether the server kept up")
        if o["client_late"]:
            note = "; ".join(x for x in (note, "sends fell behind: client saturated") if x)
        rows.append(
            f"<tr><td class='num'>{lv.load_text}</td><td class='num'>{_num(o['offered_rps'], '.2f')}</td>"
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


def _slo_words(spec: SloSpec) -> str:
    """``ttft_ms.p95 ≤ 500 ms, error rate ≤ 1.00%, valid outputs ≥ 99.00%`` (empty: no objective)."""
    return ", ".join(
        [f"{c.name} ≤ {c.limit:g} ms" for c in spec.checks]
        + ([f"error rate ≤ {spec.max_error_rate:.2%}"] if spec.max_error_rate is not None else [])
        + ([f"valid outputs ≥ {spec.min_valid_output_rate:.2%}"] if spec.min_valid_output_rate is not None else [])
    )


def _checks_table(analysis: Analysis) -> str:
    rows = []
    for lv in analysis.levels:
        for c in lv.checks:
            if c.metric == SUSTAINED_CHECK:  # what the server sustains, against the rate: req/s, not a share
                value = f"{c.value:.3g} req/s" if math.isfinite(c.value) else "–"
                ci = f"{c.ci[0]:.3g} – {c.ci[1]:.3g} req/s" if math.isfinite(c.ci[0]) else "–"
                limit = f"{c.limit:g} req/s"
            elif c.percentile is None:  # a share: the error budget or the valid-output floor
                value = f"{c.value:.2%}" if math.isfinite(c.value) else "–"
                ci = f"{c.ci[0]:.2%} – {c.ci[1]:.2%}" if math.isfinite(c.ci[0]) else "–"
                limit = f"{c.limit:.2%}"
            else:
                value = fmt_ms(c.value) if not math.isnan(c.value) else "–"
                ci = f"{fmt_ms(c.ci[0])} – {fmt_ms(c.ci[1])}" if not math.isnan(c.ci[0]) else "–"
                limit = f"{c.limit:g}"
            rows.append(
                f"<tr><td class='num'>{lv.load_text}</td><td>{_e(f'{c.class_name}: {c.name}' if c.class_name else c.name)}</td><td class='num'>{_e(value)}</td>"
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
        f"<tr><th>{load_words(analysis.levels)[1]}</th><th>check</th><th>value</th><th>{label}</th><th>limit</th><th>n</th>"
        "<th>verdict</th></tr>"
        + "".join(rows) + "</table></details>"
    )


def _num(value: float, fmt: str) -> str:
    return "–" if value is None or not math.isfinite(value) else format(value, fmt)


def errors_section(analysis: Analysis) -> str:
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
    head = (f"<tr><th>{load_words(analysis.levels)[1]}</th><th>requests</th><th>errors</th>"
            + "".join(f"<th>{_e(k)}</th>" for k in kinds) + "</tr>")
    rows = [
        f"<tr><td class='num'>{lv.load_text}</td><td class='num'>{lv.requests}</td><td class='num'>{lv.errors}</td>"
        + "".join(f"<td class='num'>{lv.errors_by_kind.get(k, 0)}</td>" for k in kinds)
        + "</tr>"
        for lv in analysis.levels
    ]
    messages = ""
    groups = message_groups(analysis.requests)
    if groups:
        items = "".join(
            f"<tr><td>{_e(g.kind)}</td><td class='num'>{g.count}</td><td><code>{_e(g.message)}</code>"
            + (f" <span class='dim'>({g.messages} messages alike but for their numbers)</span>" if g.messages > 1 else "")
            + "</td></tr>"
            for g in groups
        )
        messages = (
            "<h3>Most frequent error messages (whole run)</h3><table class='grid'>"
            "<tr><th>kind</th><th>count</th><th>message</th></tr>" + items + "</table>"
        )
    return f"<table class='grid'>{head}{''.join(rows)}</table>{note}{messages}"


def warnings_section(analysis: Analysis) -> str:
    if not analysis.warnings:
        return "<p>None.</p>"
    return "<ul class='warnings'>" + "".join(f"<li>{_e(w)}</li>" for w in analysis.warnings) + "</ul>"


def scenario_section(analysis: Analysis) -> str:
    scenario = analysis.run.get("scenario") or {}
    try:
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
