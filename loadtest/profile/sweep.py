"""What a profile's sweep prints when it ends: its levels as measured, and what its verdicts were judged
against; no capacity, no autoscaling.

Why: each sweep is an ordinary run, and a run's terminal summary judges its levels against its SLOs,
then gives a capacity and autoscaling advice. A sweep's SLOs are not the user's: the decode ladder's
is the profile's stopping rule (ITL p50 at most twice one sequence's, :func:`plan.decode_scenario`),
the other sweeps' the scenario's error budget alone. Against a 1-thread llama-server whose user asked
for an ITL p95 of 100 ms, the ladder printed "Even the lowest tested level (2 concurrent users) fails
the SLOs: the p50 ITL is 3.71 ms against a 2.158 ms limit" and each sweep "autoscaling: ... aim for
0.8 concurrent users per replica", which read as findings about the endpoint. Each sweep's folder
keeps its summary.json, report.html and autoscaling.yaml as any run's (``loadtest analyze --slo``
re-judges it against real SLOs); the terminal gets the table, what the verdict column was judged
against, where the ladder stopped, and the warnings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text

from loadtest.report.terminal import build_table

#: The check of the decode ladder's stopping rule (plan.decode_scenario's SLO).
RULE_CHECK = "itl_ms.p50"


@dataclass(frozen=True)
class SweepPrinter:
    """Prints a sweep's terminal summary (``RunOptions.summary_printer``)."""

    #: The ladder's stop: its ITL p50 limit as a multiple of one sequence's; None for a sweep without one.
    itl_growth_stop: float | None = None

    def __call__(self, analysis: Any, console: Any) -> None:
        console.print(build_table(analysis))
        for line in sweep_lines(analysis, self.itl_growth_stop):
            console.print(Text(line, style="dim"))
        for warning in analysis.warnings:
            console.print(Text(f"warning: {warning}", style="yellow"))


def sweep_lines(analysis: Any, itl_growth_stop: float | None) -> list[str]:
    """What the verdict column was judged against, and where (and why) the sweep's levels stopped passing."""
    slo = analysis.slo
    budget = slo.max_error_rate
    budget_words = f"the error budget (slo.max_error_rate {budget * 100:g}%)" if budget else "no error budget"
    limit = _rule_limit(slo)
    if limit is not None:
        times = f", {itl_growth_stop:g} × one sequence's" if itl_growth_stop else ""
        out = [f"verdict: the profile's stopping rule for this ladder (ITL p50 ≤ {limit:g} ms{times}) and "
               f"{budget_words}, not your SLOs: a profile's sweep gives no capacity or autoscaling advice"]
    else:
        out = [f"verdict: {budget_words} alone, not your SLOs: a profile's sweep has no latency limit and gives "
               "no capacity or autoscaling advice"]
    cap = analysis.capacity
    at = cap.first_failing
    if at is None:
        return out
    if cap.binding == RULE_CHECK and limit is not None:
        out.append(f"the ladder stops at {at} users: its ITL p50 {cap.binding_value:.3g} ms passed {limit:g} ms")
    elif cap.binding == "error_rate" and cap.binding_value is not None:
        out.append(f"at {at} users {cap.binding_value:.1%} of requests failed, over {budget_words}: the profile's "
                   "figures from that level on rest on fewer requests (see the sweep's report.html)")
    else:
        out.append(f"at {at} users {cap.binding or 'a check'} failed (see the sweep's report.html)")
    return out


def _rule_limit(slo: Any) -> float | None:
    """The ITL p50 limit of the ladder's stopping rule, or None for a sweep without one."""
    return next((float(c.limit) for c in slo.checks if c.name == RULE_CHECK), None)
