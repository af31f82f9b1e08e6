"""A level's reason in words, and whose it is: the look's that decided it, or the final figures'.

A look judges the records of its instant, with the requests then in flight counted as waiting
(:mod:`decide`): a request still waiting past a TTFT limit is a certain miss, +inf in the p95. After
the look the load is held until those requests end (the hold), and the final analysis sees their
real TTFTs. So the look's reason can describe figures the final row no longer shows (a trial: "p95
TTFT is unbounded (more than 5% of requests failed or were cut after waiting past the limit)" beside
a final p95 of 1,006.5 ms and no failure). The run acted on the look, so its reason stays, but says
that it was the look's ("at the look at 3.5 s, with the requests then in flight counted as waiting:
…"), and ``decision.why_final`` gives the reason the final figures give. Where both say the same,
``why`` is unchanged.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from loadtest.analysis.results import LevelResult


def level_why(level: LevelResult) -> str:
    """The reason a level's figures give for its status: what a look records, and ``why_final``."""
    from loadtest.analysis.capacity import describe_check  # capacity imports the verdicts; not at import

    if level.status == "no_data":
        return "no request measured yet"
    if level.status == "pass":
        return "every check passes"
    wanted = "fail" if level.status == "fail" else "uncertain"
    check = next((c for c in level.checks if c.verdict == wanted), None)
    if check is None:
        return level.status
    text = describe_check(check)
    if check.reason and wanted == "uncertain":
        text += f" ({check.reason})"
    return text if math.isfinite(check.limit) else level.status


def look_prefix(decision: Mapping[str, Any]) -> str:
    """``"at the look at 3.5 s, with the requests then in flight counted as waiting: "``, or "" without a look."""
    looks = decision.get("looks_taken") or []
    last = looks[-1] if looks and isinstance(looks[-1], Mapping) else {}
    at = last.get("at_s")
    if at is None:
        return ""
    return f"at the look at {float(at):g} s, with the requests then in flight counted as waiting: "


def reconcile_why(level: LevelResult) -> LevelResult:
    """Say whose the level's ``decision.why`` is where the final figures give another reason (module doc)."""
    decision = level.decision
    why = decision.get("why") if decision else None
    if not why or not decision.get("looks_taken"):
        return level
    final = level_why(level)
    decision["why_final"] = final
    prefix = look_prefix(decision)
    if final != why and prefix and not why.startswith("at the look at "):
        decision["why"] = prefix + why
    return level
