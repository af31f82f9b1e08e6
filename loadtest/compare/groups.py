"""The gate over groups of runs and a history: several baselines, several candidates, run-to-run noise.

``loadtest compare B… C… --history DIR…`` (and ``run --baseline … --history``):

1. The first baseline and the first candidate are compared by
   :func:`engine.compare_runs` (fingerprints, SLO, records, the within-run
   intervals). Every other run must have the same workload fingerprint
   (exit 2 otherwise).
2. With several runs in a group, a check's change is the difference of the
   groups' means (of the log for relative checks) and its within-run interval
   joins each run's own interval (from its summary).
3. The *reference runs* are the baselines plus every run of the same
   fingerprint found under ``--history`` (newest :data:`noise.MAX_REFERENCE_RUNS`,
   made before the candidates, warm-up runs and the candidates excluded). With
   at least ``min_history`` of them, each check gets the run-to-run prediction
   interval (:mod:`noise`, at :func:`noise.family_confidence` for the number of
   gated checks) and a regression must be beyond the tolerance and outside it. With fewer, a regression whose change is less than
   :data:`noise.UNKNOWN_NOISE_FACTOR` tolerances is ``inconclusive: run-to-run
   noise unknown``, with how many more runs are needed.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any, Sequence

from loadtest.analysis.bootstrap import rng_for
from loadtest.compare import noise
from loadtest.compare.capacity import CapacityBounds, capacity_change
from loadtest.compare.change import Change, classify, describe_change, untrusted_note
from loadtest.compare.change import severity as _severity
from loadtest.compare.engine import Comparison, compare_runs, require_same_workload, side_fingerprint
from loadtest.fingerprint import fingerprint_of_run
from loadtest.compare.inputs import RUN_JSON, SUMMARY_JSON, RunInput, find_runs, load_run
from loadtest.compare.rules import CAPACITY, ERROR_RATE, Rules
from loadtest.compare.stationarity import hold_drifting
from loadtest.errors import InputError
from loadtest.run_record import normalized


def compare_groups(
    baselines: Sequence[Path | str],
    candidates: Sequence[Path | str],
    rules: Rules,
    *,
    history: Sequence[Path | str] = (),
    min_history: int = noise.MIN_HISTORY_RUNS,
    seed: int = 0,
    args: tuple[str, str] = ("baseline", "candidate"),
) -> Comparison:
    """The gate on the two groups, with run-to-run noise from the baselines and ``history``.

    ``args`` name the two sides' paths in messages (``--baseline`` when ``run`` compares).
    """
    if not baselines or not candidates:
        raise InputError("compare: at least one baseline and one candidate run are needed")
    cmp = compare_runs(baselines[0], candidates[0], rules, seed=seed, args=args)
    base = [_summary_side(p, "baseline") for p in baselines]
    cand = [_summary_side(p, "candidate") for p in candidates]
    # the first of each group is used as the engine judged it (cmp.baseline / cmp.candidate)
    for (path, side), which in [(b, "baseline") for b in base[1:]] + [(c, "candidate") for c in cand[1:]]:
        require_same_workload(cmp.fingerprint, side_fingerprint(side, which), prefix=f"{which} {path}: ")
    ref = _reference(cmp, base, cand, history)
    cmp.baselines = [str(p) for p, _ in base]
    cmp.candidates = [str(p) for p, _ in cand]
    cmp.history_runs = len(ref)
    if len(base) > 1 or len(cand) > 1:
        cmp.warnings.append(f"{len(base)} baseline and {len(cand)} candidate runs: each check compares the groups' means")
        _group_capacity(cmp, [s for _, s in base], [s for _, s in cand], rules)
    unknown = 0
    cmp.noise_confidence = noise.family_confidence(sum(1 for c in cmp.changes if c.level is not None and c.gating))
    for change in cmp.changes:
        if change.level is None or change.baseline is None:
            continue
        if _with_noise(change, cmp, [s for _, s in base], [s for _, s in cand], ref, rules, min_history, seed):
            unknown += 1
    if unknown:
        need = max(min_history - len(ref), 1)
        cmp.hint = (f"run-to-run noise is unknown with {len(ref)} reference run(s): give --history with at least "
                    f"{need} more run(s) of this workload")
    cmp.changes.sort(key=_severity)
    return cmp


# -- the runs ---------------------------------------------------------------------------------


def _summary_side(path: Path | str, which: str) -> tuple[Path, RunInput]:
    side = load_run(path, records=False)
    if side.summary is None:
        raise InputError(f"{which} {path}: no summary.json (run `loadtest analyze {path}` first)")
    return Path(path), side


def _reference(cmp: Comparison, base, cand, history: Sequence[Path | str]) -> list[tuple[str, dict[str, Any]]]:
    """(folder, summary) of every reference run: the baselines, then the history's runs of this fingerprint."""
    seen = {_key(p) for p, _ in base}
    exclude = {_key(p) for p, _ in cand}
    before = min((s.started_wall for _, s in cand if s.started_wall is not None), default=math.inf)
    out: list[tuple[str, dict[str, Any], float]] = [
        (str(p), (s.summary or {}) if i else cmp.baseline.summary, s.started_wall or 0.0) for i, (p, s) in enumerate(base)
    ]
    found: list[tuple[str, dict[str, Any], float]] = []
    for folder in find_runs([Path(h) for h in history]) if history else []:
        key = _key(folder)
        if key in seen or key in exclude:
            continue
        seen.add(key)
        item = _history_run(folder, cmp.fingerprint.get("hash"))
        if item is not None and item[2] < before:
            found.append(item)
    found.sort(key=lambda t: t[2])
    room = max(0, noise.MAX_REFERENCE_RUNS - len(out))
    found = found[len(found) - room:] if room else []  # the newest
    return [(f, s) for f, s, _ in out + found]


def _history_run(folder: Path, fp_hash: str | None) -> tuple[str, dict[str, Any], float] | None:
    """A history run of the same fingerprint, complete and not a warm-up run; None otherwise."""
    try:
        run = normalized(json.loads((folder / RUN_JSON).read_text(encoding="utf-8")))  # through the run record
        summary = json.loads((folder / SUMMARY_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # a half-written or damaged folder is not part of the history
    if run.get("warmup_run") or run.get("complete") is False:
        return None
    if fingerprint_of_run(run, summary).get("hash") != fp_hash:
        return None
    started = run.get("started_wall") or (summary.get("run") or {}).get("started_wall") or 0.0
    return (str(folder), summary, float(started))


def _key(path: Path | str) -> str:
    p = Path(path)
    p = p.parent if p.is_file() else p
    return str(p.resolve())


# -- one check ------------------------------------------------------------------------------


def _with_noise(change: Change, cmp: Comparison, base: list[RunInput], cand: list[RunInput],
                ref: list[tuple[str, dict[str, Any]]], rules: Rules, min_history: int, seed: int) -> bool:
    """Re-judge one level check with the groups and the run-to-run noise; True when that noise was unknown."""
    conf = cmp.confidence
    level = int(change.level)  # type: ignore[arg-type]
    relative = change.kind != ERROR_RATE
    pts_b = [_point(s.summary if i else cmp.baseline.summary, change, level, conf) for i, s in enumerate(base)]
    pts_c = [_point(s.summary if i else cmp.candidate.summary, change, level, conf) for i, s in enumerate(cand)]
    if any(p is None for p in pts_b + pts_c):
        return False  # a value missing or reached by failures in some run: the pair's verdict stands
    scale = noise.to_log if relative else (lambda x: x)
    unscale = noise.to_relative if relative else (lambda x: x)
    if len(pts_b) > 1 or len(pts_c) > 1:
        d, within = noise.group_change(pts_b, pts_c, conf)  # type: ignore[arg-type]
        change.baseline = _group_value(pts_b, relative)  # type: ignore[arg-type]
        change.candidate = _group_value(pts_c, relative)  # type: ignore[arg-type]
    else:
        d = scale(float(change.change))
        within = (scale(_f(change.ci[0])), scale(_f(change.ci[1])))
    reference = [p for p in (_point(s, change, level, conf, f) for f, s in ref) if p is not None]
    change.noise_runs = len(reference)
    change.change = unscale(d)
    change.ci = change.within_ci = (unscale(within[0]), unscale(within[1]))
    sign = -1.0 if change.kind == "throughput" else 1.0  # badness: worse is positive
    bad = sorted(sign * x for x in (_f(change.ci[0]), _f(change.ci[1])))
    bad_point = sign * _f(change.change)
    tol = change.tolerance or 0.0
    verdict, may_regress = classify(bad[0], bad[1], tol)
    if math.isnan(bad[0]) and abs(bad_point) <= tol:
        verdict, may_regress = "unchanged", False  # no within-run interval, but the change is within tolerance
    if len(reference) >= min_history:
        null = noise.null_interval(reference, len(pts_b), len(pts_c), cmp.noise_confidence,
                                   rng_for(seed, "noise", level, change.check))
        change.noise_ci = (unscale(null[0]), unscale(null[1]))
        change.noise = "history"
        verdict, may_regress = _beyond_noise(verdict, may_regress, sign * d, sorted(sign * x for x in null))
    else:
        change.noise = "unknown"
    summaries = [cmp.baseline.summary, cmp.candidate.summary] + [s.summary for s in base[1:] + cand[1:]]
    saturated = any(_level_flag(s, level, "client_saturated") for s in summaries)
    contended = any(_level_flag(s, level, "host_contended") for s in summaries)
    if (saturated or contended) and verdict == "regression":
        verdict = "inconclusive"  # the numbers include the load generator's own delay, or the busy host's
    was_unknown = False
    if change.noise == "unknown" and verdict == "regression" and bad_point < noise.UNKNOWN_NOISE_FACTOR * tol:
        verdict, may_regress, was_unknown = "inconclusive", True, True
    change.verdict, change.may_regress = verdict, may_regress
    change.message = (describe_change(change, conf) + _noise_words(change, min_history, was_unknown, relative)
                      + untrusted_note(saturated, contended))
    hold_drifting(change, {**cmp.baseline.drifting, **cmp.candidate.drifting})
    return was_unknown


def _beyond_noise(verdict: str, may_regress: bool, bad_d: float, null: list[float]) -> tuple[str, bool]:
    """The verdict once the run-to-run noise is known: a change must be beyond the tolerance *and*
    outside the prediction interval of a healthy server (``null``, in badness), the within-run
    interval still deciding whether it is beyond the tolerance at all."""
    if math.isnan(null[0]):
        return verdict, may_regress
    if null[0] <= bad_d <= null[1]:
        return "unchanged", False  # run-to-run noise explains the change
    if bad_d > null[1]:  # worse than a healthy server moves
        if verdict in ("regression", "inconclusive"):
            return verdict, may_regress
        return verdict, False
    # better than the noise: an improvement if certain, otherwise it cannot be a regression
    return ("improvement", False) if verdict == "improvement" else (
        ("unchanged", False) if verdict != "regression" else ("inconclusive", False))


def _point(summary: dict[str, Any] | None, change: Change, level: int, conf: float, folder: str = "") -> noise.RunPoint | None:
    if not summary:
        return None
    return noise.run_point(summary, change.check, change.kind, level, conf, folder)


def _group_value(points: list[noise.RunPoint], relative: bool) -> float:
    mean = statistics.fmean(p.value for p in points)
    return math.exp(mean) if relative else mean


def _noise_words(change: Change, min_history: int, unknown: bool, relative: bool) -> str:
    unit = "%" if relative else " pp"

    def pct(x: float | None) -> str:
        return "?" if x is None or math.isnan(x) else f"{x * 100:+.1f}{unit}"

    w = change.within_ci or (math.nan, math.nan)
    if change.noise == "history" and change.noise_ci is not None:
        n = change.noise_ci
        return (f"; within-run [{pct(w[0])}, {pct(w[1])}], run-to-run noise [{pct(n[0])}, {pct(n[1])}] "
                f"from {change.noise_runs} runs")
    if unknown:
        need = max(min_history - change.noise_runs, 1)
        return (f"; inconclusive: run-to-run noise unknown ({change.noise_runs} reference run(s) of this workload, "
                f"{min_history} needed: add --history with {need} more)")
    return ""


def _level_flag(summary: dict[str, Any] | None, level: int, flag: str) -> bool:
    """``flag`` (client_saturated, host_contended) set at ``level`` in a run's summary."""
    return any(lv.get(flag) for lv in (summary or {}).get("levels") or [] if lv.get("concurrency") == level)


def _f(x: float | None) -> float:
    return math.nan if x is None else float(x)


# -- capacity of groups ---------------------------------------------------------------------


def _group_capacity(cmp: Comparison, base: list[RunInput], cand: list[RunInput], rules: Rules) -> None:
    """Capacity of a group: the median run's, bracketed by the hull of every run's certain bracket
    (a drop is certain only when every candidate's bracket lies below every baseline's)."""
    summaries_b = [cmp.baseline.summary] + [s.summary or {} for s in base[1:]]
    summaries_c = [cmp.candidate.summary] + [s.summary or {} for s in cand[1:]]

    def group(summaries: list[dict[str, Any]]) -> tuple[dict[str, Any], CapacityBounds]:
        bounds = [CapacityBounds.from_levels(s.get("levels") or []) for s in summaries]
        caps = [c for c in ((s.get("capacity") or {}).get("concurrency") for s in summaries) if isinstance(c, (int, float))]
        tested = [b.max_tested for b in bounds if b.max_tested is not None]
        hull = CapacityBounds(min(b.lower for b in bounds), max(b.upper for b in bounds), max(tested) if tested else None)
        return {"concurrency": statistics.median_low(caps) if caps else None}, hull

    cap_b, bounds_b = group(summaries_b)
    cap_c, bounds_c = group(summaries_c)
    new = capacity_change(cap_b, bounds_b, cap_c, bounds_c, rules.gates(CAPACITY, CAPACITY))
    cmp.changes = [new if c.kind == CAPACITY else c for c in cmp.changes]
