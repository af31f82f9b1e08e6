"""Request classes in the gate: the SLO each class was judged by, and the checks of its own SLO.

A class's SLO judges its requests as the top-level SLO judges the level's: it is left out of the
workload fingerprint (:mod:`loadtest.fingerprint`), both runs are judged under the candidate's,
and each class with an SLO of its own adds its percentiles as checks (``chat.itl_ms.p95``), read
from the summaries' ``levels[].classes`` entries (:func:`loadtest.compare.summary_values.scoped`).
"""

from __future__ import annotations

from typing import Mapping

from loadtest.analysis.slo import SloSpec
from loadtest.compare.inputs import RunInput


def class_slos(side: RunInput, top: SloSpec) -> dict[str, SloSpec]:
    """Each request class's SLO the run was last judged by: its summary's (``analyze --slo`` may have changed
    it), else its scenario's (a class without one inherits ``top``); empty without classes."""
    classes = (side.scenario.get("workload") or {}).get("classes") or []
    if not classes:
        return {}
    # the analysis' rule for a class's SLO; imported here, with a scenario that has classes
    from loadtest.analysis.classes import class_slos as class_slos_for

    own = class_slos_for({"scenario": side.scenario}, top)[1]
    judged = (side.summary or {}).get("classes") or {}
    for name in own:
        stored = (judged.get(name) or {}).get("slo") if isinstance(judged.get(name), Mapping) else None
        if isinstance(stored, Mapping):
            own[name] = SloSpec.from_dict(stored).with_overrides([], class_name=name)
    return own


def class_checks(*sides: tuple[SloSpec, Mapping[str, SloSpec]]) -> list[str]:
    """Each request class's own SLO percentiles, named as its verdicts are (``chat.itl_ms.p95``).

    Why: a workload whose limits are per class (chat's ITL, summarize's e2e) had no check of them in
    the gate, only the whole level's; a slower class inside a steady mix passed every night. A class
    that holds the top-level SLO adds none (the level's checks judge it), which keeps the family of
    checks judged together, and so its thresholds, as it was. Its intervals come from the summaries'
    (:mod:`level_changes`); its run-to-run noise from the reference runs' summaries, as any check's."""
    names: list[str] = []
    for top, classes in sides:
        for name, slo in classes.items():
            if slo.to_dict() == top.to_dict():
                continue
            for check in slo.checks:  # each a percentile (the error budget is not among them)
                if f"{name}.{check.name}" not in names:
                    names.append(f"{name}.{check.name}")
    return names
