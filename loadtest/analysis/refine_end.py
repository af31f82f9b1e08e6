"""Why ``--refine`` probes no further: one sentence for the terminal and run.json's ``refine``.

Refinement bisects between a *certain* pass and the first level above it that did
not pass (:func:`loadtest.analysis.refine.bracket`). When there is no such pair it
used to stop without a word, so a user who asked for ``--refine`` and got no probe
could not tell "the answer is already exact" from "an undecided level stood in the
way" (trial E: an open-loop run whose lowest level was undecided, too few samples).
This module says which it was, from the same verdicts the bisection read: a pure
function over the analysed levels, called once ``next_refine`` answers None.

``ended`` (run.json ``refine.ended``):

* ``closed``: the bracket is as narrow as refine goes (adjacent users; a rate
  bracket within the resolution), after the probes it took;
* ``no_failure``: every tested level passed, so there is no upper end;
* ``lowest_fails``: the lowest level fails and refine probes no lower (1 user; a rate at
  :data:`~loadtest.analysis.refine.RATE_FLOOR_SHARE` of the lowest declared one; or the
  probe below it measured no request), so there is no lower end;
* ``undecided``: no certain pass lies below the first level that did not pass,
  because a level there is uncertain: longer levels would decide it.

Two more come from the load stage, not from here: ``stopped`` (the run was stopped
during refinement) and ``probe_limit`` (the most probes refine takes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from loadtest.analysis.capacity import describe_check
from loadtest.analysis.refine import RATE_FLOOR_SHARE, RATE_RESOLUTION_SHARE, halving_passes_floor, lowest_declared_rate
from loadtest.analysis.results import LevelResult

#: What points a user at a fix for an undecided level (the capacity message says the same).
LONGER = "longer levels (load.max_level_duration_s) would decide it"


@dataclass(frozen=True)
class RefineEnd:
    """How refinement ended: ``ended`` (a word, see the module doc) and ``why`` (one sentence)."""

    ended: str
    why: str
    probes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"ended": self.ended, "why": self.why, "probes": self.probes}

    def line(self) -> str:
        """The terminal's line: ``refine: nothing to bisect: …`` or ``refine: done after 3 probes: …``."""
        if self.ended == "closed" and self.probes:
            took = f"{self.probes} probe{'' if self.probes == 1 else 's'}"
            return f"refine: done after {took}: {self.why}"
        if self.ended == "closed":  # the sweep's own levels were already adjacent
            return f"refine: nothing to bisect: {self.why}"
        return f"refine: {self.why}"


def refine_end(levels: Sequence[LevelResult], probes: int, rate_resolution: float | None = None) -> RefineEnd:
    """Why the bisection over ``levels`` (every level so far, analysed) has no next probe.

    ``probes``: how many refine probes ran. ``rate_resolution``: ``--rate-resolution``
    (open loop; None: :data:`~loadtest.analysis.refine.RATE_RESOLUTION_SHARE` of the first non-pass).
    """
    usable = _one_per_load([lv for lv in levels if lv.status != "no_data"])
    if not usable:
        return RefineEnd("undecided", "nothing to bisect: no level measured a request", probes)
    blocker = next((i for i, lv in enumerate(usable) if lv.status != "pass"), None)
    if blocker is None:
        top = usable[-1]
        return RefineEnd("no_failure", f"nothing to bisect: every tested level passed, up to {top.label}; "
                         "a higher top level would bracket the capacity", probes)
    first = usable[blocker]
    if blocker > 0:  # a certain pass right below the first level that did not pass: the bracket is closed
        low = usable[blocker - 1]
        return RefineEnd("closed", f"the bracket is closed between a pass at {low.label} and {_not_pass(first)} at "
                         f"{first.label} ({_narrow(low, first, rate_resolution)})", probes)
    if first.status == "fail":
        return RefineEnd("lowest_fails", f"nothing to bisect: {_lowest_fails(first, levels)}", probes)
    failing = next((lv for lv in usable if lv.status == "fail"), None)
    above = f" ({failing.label} fails)" if failing is not None else ""
    return RefineEnd(
        "undecided",
        f"nothing to bisect: the lowest level, {first.label}, is uncertain{_doubt(first)}, not a certain pass{above}; "
        f"refine bisects up from a certain pass only, and {LONGER}",
        probes,
    )


def _lowest_fails(first: LevelResult, levels: Sequence[LevelResult]) -> str:
    """Why refine probes no lower than a failing ``first`` (the lowest level with a verdict)."""
    if first.rate_rps is None and first.concurrency <= 1:
        return f"even {first.label} fails, so no load holds the SLOs"
    declared = lowest_declared_rate(levels)
    if first.rate_rps is not None and declared is not None and halving_passes_floor(first.rate_rps, RATE_FLOOR_SHARE * declared):
        return (f"the lowest level, {first.label}, fails, and refine probes no lower than an eighth of the lowest "
                f"declared level: the capacity is below it")
    below = [lv for lv in levels if lv.load < first.load]
    if below:  # halving went on, and the probe below measured nothing
        return f"the lowest level with a verdict, {first.label}, fails, and the probe below it measured no request"
    return f"the lowest level, {first.label}, fails"


def _one_per_load(levels: list[LevelResult]) -> list[LevelResult]:
    """One level per load, in load order: a load run twice passes only if every run of it did (as the bracket reads it)."""
    by_load: dict[float, LevelResult] = {}
    for lv in sorted(levels, key=lambda lv: (lv.load, lv.index)):
        held = by_load.get(lv.load)
        if held is None or (held.status == "pass" and lv.status != "pass") or (held.status == "uncertain" and lv.status == "fail"):
            by_load[lv.load] = lv
    return [by_load[load] for load in sorted(by_load)]


def _not_pass(level: LevelResult) -> str:
    return "a failure" if level.status == "fail" else f"an undecided level{_doubt(level)}"


def _doubt(level: LevelResult) -> str:
    """`` (the p95 TTFT, too few samples)``: the check that left ``level`` undecided, or ""."""
    check = next((c for c in level.checks if c.verdict == "uncertain"), None)
    if check is None:
        return ""
    said = describe_check(check)
    return f" ({said}, {check.reason})" if check.reason else f" ({said})"


def _narrow(low: LevelResult, high: LevelResult, rate_resolution: float | None) -> str:
    """Why the bracket ``low``–``high`` is narrow enough: adjacent users, or a rate within the resolution."""
    if low.rate_rps is None:
        return "adjacent levels"
    step = rate_resolution if rate_resolution is not None else RATE_RESOLUTION_SHARE * float(high.rate_rps or 0.0)
    named = "--rate-resolution" if rate_resolution is not None else f"{RATE_RESOLUTION_SHARE:.0%} of {high.label}"
    return f"within the resolution of {step:g} req/s: {named}"
