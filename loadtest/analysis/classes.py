"""Request classes: one more grouping key beside the level, each judged by its own SLO.

A mixed workload (``workload.classes``) holds a level only if **every class
meets its own SLO**: a chat class may need a fast first token while a
summarize class only needs its answer within 20 s. So each class gets the
full per-level analysis on its own records (same windows, same definitions),
checked against its SLO (the top-level one when it names none). The level's
checks are then every class's checks, tagged with the class, plus the overall
error budget; its status is the worst of them (:func:`verdict.level_status`),
so the existing capacity logic applies unchanged and its binding check names
the class (``capacity.binding_class``).

``--slo`` overrides may name a class: ``summarize.e2e_ms.p95=15000``. One
without a class prefix changes the top-level SLO, and with it every class
that has no SLO of its own.
"""

from __future__ import annotations

import math

from dataclasses import replace
from typing import Any, Iterable, Mapping, Sequence

from loadtest.analysis.results import Check, LevelResult
from loadtest.analysis.slo import METRICS, SloSpec
from loadtest.analysis.verdict import evaluate_level, level_status, rate_checks
from loadtest.errors import InputError
from loadtest.metric_registry import VALID_OUTPUT_MINIMUM


def scenario_classes(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``workload.classes`` list of a run's scenario (empty when none)."""
    scenario = run.get("scenario") or {}
    workload = scenario.get("workload") if isinstance(scenario, Mapping) else None
    classes = workload.get("classes") if isinstance(workload, Mapping) else None
    return [c for c in classes or [] if isinstance(c, Mapping) and c.get("name")]


def class_model(run: Mapping[str, Any], classes: Sequence[Mapping[str, Any]], name: str | None) -> str | None:
    """The model a class's requests named: its ``model`` override (a LoRA adapter), else target.model.

    None when ``name`` is None (no class binds). Traffic split across adapters is judged per
    class, so the class that binds the capacity is also the model (or adapter) that does.
    """
    if name is None:
        return None
    own = next((c.get("model") for c in classes if c.get("name") == name), None)
    if own:
        return str(own)
    target = (run.get("scenario") or {}).get("target") or {}
    model = target.get("model") if isinstance(target, Mapping) else None
    return str(model) if model else None


def class_slos(run: Mapping[str, Any], top: SloSpec, overrides: Iterable[str] = ()) -> tuple[SloSpec, dict[str, SloSpec]]:
    """The top-level SLO and each class's, after ``--slo`` overrides (class-prefixed or not)."""
    classes = scenario_classes(run)
    names = [str(c["name"]) for c in classes]
    overrides = list(overrides)
    top_overrides, by_class = split_overrides(overrides, names)
    _refuse_floor_without_structure(run, overrides)
    top = top.with_overrides(top_overrides)
    out: dict[str, SloSpec] = {}
    for c in classes:
        name = str(c["name"])
        own = c.get("slo")
        base = SloSpec.from_dict(own) if isinstance(own, Mapping) else top
        out[name] = base.with_overrides(by_class.get(name, []), class_name=name)
    return top, out


def _refuse_floor_without_structure(run: Mapping[str, Any], overrides: Sequence[str]) -> None:
    """``--slo min_valid_output_rate=…`` on a run that asked for no structured output: refused.

    No answer of such a run was checked for validity, so the floor would judge
    nothing and every level would pass it silently. The scenario path refuses the
    same floor in YAML (scenario/_kinds.py); a re-analysis must not let it in.
    """
    floors = [raw for raw in overrides if raw.partition("=")[0].strip().rpartition(".")[2] == VALID_OUTPUT_MINIMUM]
    if not floors:
        return
    workload = (run.get("scenario") or {}).get("workload") or {}
    holders = [workload, *(workload.get("classes") or [])] if isinstance(workload, Mapping) else []
    if not any(isinstance(h, Mapping) and (h.get("tools") or h.get("response_format")) for h in holders):
        raise InputError(f"bad --slo override {floors[0]!r}: this run's workload asked for no structured output "
                         "(no workload.tools or workload.response_format), so no answer was checked")


def split_overrides(overrides: Iterable[str], names: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Route ``class.metric.pct=limit`` to its class and the rest to the top level.

    Each is kept as the user gave it, class prefix included: a message about it quotes it whole.
    """
    top: list[str] = []
    by_class: dict[str, list[str]] = {}
    for raw in overrides:
        key = raw.partition("=")[0].strip()
        head, dot, rest = key.partition(".")
        if dot and head in names:
            by_class.setdefault(head, []).append(raw)
        elif dot and head not in METRICS and "." in rest:
            known = ", ".join(names) if names else "none in this run"
            raise InputError(f"bad --slo override {raw!r}: no request class named {head!r} (classes: {known})")
        else:
            top.append(raw)
    return top, by_class


def judge_classes(
    level: LevelResult, per_class: Mapping[str, LevelResult], slos: Mapping[str, SloSpec], top: SloSpec
) -> LevelResult:
    """Evaluate each class by its SLO and make ``level``'s verdict the worst over them.

    ``level`` keeps its own metrics (all classes together); its checks become
    every class's checks (tagged with the class) plus the overall error budget and
    valid-output floor.
    Goodput counts each request against its own class's limits.
    """
    checks: list[Check] = []
    for name, class_level in per_class.items():
        evaluate_level(class_level, slos[name])
        class_level.checks = [replace(c, class_name=name) for c in class_level.checks]
        if class_level.status == "no_data" and any(c.verdict == "fail" for c in class_level.checks):
            # no request of the class ended in the window, but one cut after waiting past a
            # limit is a certain miss: the class fails here, as the level it belongs to does
            class_level.status = "fail"
        checks += class_level.checks
    checks += rate_checks(level, top)
    level.classes = dict(per_class)
    level.checks = checks
    level.status = level_status(level.requests, checks)
    level.goodput_rps = _level_goodput(level, per_class.values())
    return level


def _level_goodput(level: LevelResult, classes: Iterable[LevelResult]) -> float:
    """The level's served flow times the share of it that met its own class's limits.

    Why not the classes' goodputs summed: at a rate each class's flow is counted over its own span
    (shifted by its own requests' life), so the classes' flows need not add up to the level's, and a
    trial's level read 1.36 good requests a second against 1.0 completed. Where they do add up (a
    closed loop) this is that sum.
    """
    classes = list(classes)
    flow = sum(c.requests_per_s for c in classes if math.isfinite(c.requests_per_s))
    good = sum(c.goodput_rps for c in classes if math.isfinite(c.goodput_rps))
    if flow <= 0 or not math.isfinite(level.requests_per_s):
        return good
    return level.requests_per_s * good / flow
