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
   at least ``min_history`` of them, the gated level checks are judged together
   against the reference runs (:mod:`joint`: the candidates' distance from the
   reference mean, standardized by the run-to-run spread, one false-alarm budget
   for all checks through a composite and a max): a regression must be beyond
   that noise and worse than the reference mean by more than the tolerance.
   ``noise_ci`` shows, per check, the band of the change (against the baseline
   group) inside which the check is within that noise (:meth:`joint.JointNoise.band`:
   where the verdict turns). With fewer, the run-to-run noise is unknown, and a
   latency or throughput check that the within-run interval calls worse than the
   tolerance is ``inconclusive: run-to-run noise unknown``, whatever its size,
   with how many more runs are needed: a healthy real server moves from run to
   run by more than any within-run interval shows (the suite's llama-server: ITL
   p95 at its top level +200% between two runs, TTFT p50 -37%; a vLLM's output
   tokens/s +22%), so a speed's change alone proves nothing. A rate of bad
   answers (errors, invalid outputs) is a regression there only beyond
   :data:`noise.UNKNOWN_NOISE_FACTOR` tolerances. Capacity is judged from the
   levels' brackets, with or without history.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from loadtest.analysis.bootstrap import rng_for
from loadtest.compare import counts, joint, noise, reach
from loadtest.compare.capacity import CapacityBounds, capacity_change
from loadtest.compare.change import Change, classify, describe_change, untrusted_note, worse_sign
from loadtest.compare.change import severity as _severity
from loadtest.compare.client_trust import client_explains
from loadtest.compare.alike import require_same_mode, require_same_workload, side_fingerprint
from loadtest.compare.engine import Comparison, compare_runs, say_incomplete
from loadtest.compare.reference import RunGroups, read_groups, refuse_a_run_given_twice
from loadtest.compare.inputs import RunInput
from loadtest.compare.level_keys import CAPACITY_KEY, LevelKey
from loadtest.compare.rules import ABSOLUTE, CAPACITY, ERROR_RATE, VALID_OUTPUT, Rules
from loadtest.compare.stationarity import drift_warning, hold_drifting
from loadtest.compare.summary_values import levels_by_key
from loadtest.errors import InputError
from loadtest.staged_paths import shown


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
    # the SLO metrics' medians join the checks only when there is run-to-run noise to judge them by:
    # enough reference runs, not merely --history (one earlier run, as `history` gives a series' second).
    # So the groups and the history are read first (once: on s3:// each read is a request); an input
    # that cannot be read here is left for the comparison to refuse in its own words.
    try:
        groups: RunGroups | None = read_groups(baselines, candidates, history, args)
    except InputError:
        groups = None
    cmp = compare_runs(baselines[0], candidates[0], rules, seed=seed, args=args,
                       medians=groups is not None and len(groups.reference) >= min_history)
    if groups is None or groups.fp_hash != cmp.fingerprint.get("hash"):
        groups = read_groups(baselines, candidates, history, args, cmp.fingerprint.get("hash"))
    refuse_a_run_given_twice(groups)
    base, cand = groups.base, groups.cand
    # each path named in errors as the user gave it: the first by its side, the others by --also-*
    # the first of each group is used as the engine judged it (cmp.baseline / cmp.candidate)
    for (path, side), which in [(b, "--also-baseline") for b in base[1:]] + [(c, "--also-candidate") for c in cand[1:]]:
        require_same_mode((base[0][1], args[0]), (side, which))  # levels of users and of rates are not one axis
        require_same_workload(cmp.fingerprint, side_fingerprint(side, which), prefix=f"{which} {path}: ")
    ref = [(groups.reference[0][0], cmp.baseline.summary or {}), *groups.reference[1:]]
    say_incomplete(cmp, [(s, "--also-baseline") for _, s in base[1:]] + [(s, "--also-candidate") for _, s in cand[1:]])
    cmp.baselines = [shown(p) for p, _ in base]
    cmp.candidates = [shown(p) for p, _ in cand]
    cmp.history_runs = len(ref)
    cmp.min_history = min_history
    if groups.rejected:
        cmp.warnings.append(f"--history: {len(groups.rejected)} run(s) of this workload that their own gate rejected "
                            f"(compare.json outcome: regression) are left out of the run-to-run noise, which stands for "
                            f"the healthy server's: {', '.join(groups.rejected[:3])}{' …' if len(groups.rejected) > 3 else ''}")
    if history and len(ref) == len(base):  # the user asked for a history and it gave nothing: say so
        cmp.warnings.append(f"--history: its {groups.history_folders} run folder(s) add no earlier complete run of this workload "
                            f"(besides the compared runs themselves), so the run-to-run noise has the baseline run(s) only")
    if len(base) > 1 or len(cand) > 1:
        cmp.warnings.append(f"{len(base)} baseline and {len(cand)} candidate runs: each check compares the groups' means")
        _group_capacity(cmp, [s for _, s in base], [s for _, s in cand], rules)
    checks = [c for c in (_prepare(change, cmp, [s for _, s in base], [s for _, s in cand], ref)
                          for change in cmp.changes if change.level is not None and change.baseline is not None)
              if c is not None]
    family = [c for c in checks if c.change.gating and len(c.noise.reference) >= min_history]
    for i, c in enumerate(family):
        c.slot = i
    counted = [c for c in family if c.count is not None]
    for c in counted:
        c.count_alpha = counts.COUNT_ALARMS / len(counted)
    joint_noise = joint.calibrate([c.noise for c in family], rng_for(seed, "noise"))
    if joint_noise is not None:
        cmp.noise_confidence = joint_noise.confidence()
        caught = reach.reach(joint_noise, [reach.ReachCheck(c.change.name, c.noise, c.slot, c.change.tolerance or 0.0,
                                                             c.change.relative) for c in family], seed)
        cmp.detectable = caught.to_dict() if caught is not None else None
        # the concrete figures say what the vaguer "one check must stray far" said
        cmp.warnings.append(joint_noise.describe(wide_words=caught is None or not caught.wide))
        if caught is not None and caught.wide:
            cmp.warnings.append(caught.words())
    unknown = 0
    for c in checks:
        if _judge(c, cmp, [s for _, s in base], [s for _, s in cand], joint_noise, min_history):
            unknown += 1
    _baseline_drift_words(cmp, len(ref))
    if not cmp.incomplete:  # else the stop is what left it undecided (engine.say_incomplete)
        cmp.hint = noise.history_hint(cmp.changes, len(ref), min_history, unknown) or cmp.hint
    cmp.changes.sort(key=_severity)
    return cmp


# -- one check ------------------------------------------------------------------------------


@dataclass
class _Check:
    """One level check prepared for the noise: its change (re-valued for the groups) and its runs."""

    change: Change
    noise: joint.CheckNoise
    d: float  # change of the group means, on the noise scale
    within: tuple[float, float]
    slot: int = -1  # its place among the checks judged together (-1: not one of them)
    count: counts.CleanCount | None = None  # a rate whose reference runs never went wrong (:mod:`counts`)
    #: The groups' runs hold no within-run interval for it (a summary keeps none for throughput): shown
    #: without one, and judged on its point, as the zero-width interval summed from zeros once was.
    point_only: bool = False
    count_alpha: float = 0.0  # the count test's level for this check (its share of counts.COUNT_ALARMS)


def _prepare(change: Change, cmp: Comparison, base: list[RunInput], cand: list[RunInput],
             ref: list[tuple[str, dict[str, Any]]]) -> _Check | None:
    """The groups' change of one level check and its reference runs; None when some run lacks a value
    (missing, or reached by failures: the pair's verdict stands)."""
    conf = cmp.confidence
    level: LevelKey = change.level  # type: ignore[assignment]
    relative = change.relative
    pts_b = [_point(s.summary if i else cmp.baseline.summary, change, level, conf) for i, s in enumerate(base)]
    pts_c = [_point(s.summary if i else cmp.candidate.summary, change, level, conf) for i, s in enumerate(cand)]
    if any(p is None for p in pts_b + pts_c):
        return None
    scale = noise.to_log if relative else (lambda x: x)
    point_only = False
    if len(pts_b) > 1 or len(pts_c) > 1:
        d, within = noise.group_change(pts_b, pts_c, conf)  # type: ignore[arg-type]
        point_only = math.isnan(within[0])
        if change.kind in ABSOLUTE and all(p.value == _BOUNDARY[change.kind] for p in pts_b + pts_c):  # type: ignore[union-attr]
            # no run failed (or every answer was valid): as the pair's resampling gives, no change and no
            # interval ("no request failed in either run"); the runs' Wilson widths held 0 → 0 as ±14 pp
            d, within = 0.0, (0.0, 0.0)
        change.baseline = _group_value(pts_b, relative)  # type: ignore[arg-type]
        change.candidate = _group_value(pts_c, relative)  # type: ignore[arg-type]
    else:
        d = scale(float(change.change))
        within = (scale(_f(change.ci[0])), scale(_f(change.ci[1])))
    reference = [p for p in (_point(s, change, level, conf, f) for f, s in ref) if p is not None]
    sign = worse_sign(change.kind)  # badness: worse is positive (fewer valid answers too)
    conf_c = float((cmp.candidate.summary or {}).get("confidence") or conf)  # as its own interval was taken
    noise_c = joint.CheckNoise(reference, [p.value for p in pts_c], sign, noise.candidate_ses(pts_c, reference, conf_c))  # type: ignore[arg-type]
    count = None
    if change.kind in ABSOLUTE:  # a rate: its candidates' levels say how many requests one blip can fail
        cand_levels = [levels_by_key(s.summary if i else cmp.candidate.summary).get(level) for i, s in enumerate(cand)]
        count = counts.clean_count(pts_c, reference, sign > 0, counts.burst_size(cand_levels))  # type: ignore[arg-type]
    return _Check(change, noise_c, d, within, count=count, point_only=point_only)


def _judge(c: _Check, cmp: Comparison, base: list[RunInput], cand: list[RunInput], joint_noise: joint.JointNoise | None,
           min_history: int) -> bool:
    """Re-judge one level check with the groups and the run-to-run noise; True when that noise was unknown."""
    change, conf = c.change, cmp.confidence
    level: LevelKey = change.level  # type: ignore[assignment]
    relative = change.relative
    unscale = noise.to_relative if relative else (lambda x: x)
    change.noise_runs = c.noise.n
    change.change = unscale(c.d)
    change.ci = change.within_ci = (unscale(c.within[0]), unscale(c.within[1]))
    sign = c.noise.sign
    bad = sorted(sign * x for x in (_f(change.ci[0]), _f(change.ci[1])))
    bad_point = sign * _f(change.change)
    tol = change.tolerance or 0.0
    verdict, may_regress = classify(bad_point, bad_point, tol) if c.point_only else classify(bad[0], bad[1], tol)
    if math.isnan(bad[0]) and abs(bad_point) <= tol:
        verdict, may_regress = "unchanged", False  # no within-run interval, but the change is within tolerance
    extra = ""
    if joint_noise is not None and c.noise.n >= min_history and c.noise.spread > 0:
        # the band a healthy candidate's change stays in: the reference mean (relative to the baseline
        # group) ± the max threshold; the verdict from the candidates' distance to the reference mean
        centre = c.d - c.noise.deviation
        lo, hi = joint_noise.band(c.slot, c.noise)  # in badness: worse positive
        if c.count is not None and (x := c.count.smallest_flagged(c.count_alpha)) is not None:
            hi = min(hi, x / c.count.trials)  # the count test's own edge (pooled; the reference runs' share was 0)
        ends = sorted(c.noise.sign * x for x in (lo, hi))
        change.noise_ci = (unscale(centre + ends[0]), unscale(centre + ends[1]))
        if not relative:  # a share's change stays where the candidate's share is one (0 to 100%)
            b = float(change.baseline)
            change.noise_ci = (max(change.noise_ci[0], 0.0 - b), min(change.noise_ci[1], 1.0 - b))  # type: ignore[type-var]
        change.noise = "history"
        verdict, may_regress, extra, change.beyond_tolerance_in_noise = _beyond_noise(c, joint_noise, tol, relative)
        side = reach.narrowed(joint_noise, c.slot, c.noise)
        if change.beyond_tolerance_in_noise:  # "unchanged" only for want of runs: what it would take
            worse_end = change.noise_ci[1] if c.noise.sign > 0 else change.noise_ci[0]
            extra += (f": the gate cannot tell it from noise with {c.noise.n} reference runs, and fails this check "
                      f"only past {noise.fmt_band_end(worse_end, relative)}")
        if side:  # the band is lopsided: say why, beside it
            extra = (f" (narrowed on the {side} side: the run as a whole moved {side}, composite "
                     f"{joint_noise.composite:+.1f})") + extra
    elif c.noise.n >= min_history:  # the reference runs never moved (no errors, ever): the tolerance decides
        centre = unscale(c.d - c.noise.deviation)
        change.noise_ci = (centre, centre)
        change.noise = "history"
    else:
        change.noise = "unknown"
    summaries = [cmp.baseline.summary, cmp.candidate.summary] + [s.summary for s in base[1:] + cand[1:]]
    # the entry compared at this level in each run (a level that ran twice: the larger one), for both flags
    compared = [levels_by_key(s).get(level) for s in summaries]
    saturated, trusted_note = client_explains(compared, change.check, change.kind, change.candidate - change.baseline)
    contended = any(lv.get("host_contended") for lv in compared if lv)
    if (saturated or contended) and verdict == "regression":
        verdict = "inconclusive"  # the numbers include the load generator's own delay, or the busy host's
    was_unknown = False
    # with the run-to-run noise unknown, a speed's change proves nothing whatever its size; a rate of
    # bad answers (not a speed that drifts) only when it barely passes the tolerance
    if change.noise == "unknown" and verdict == "regression" and (relative or bad_point < noise.UNKNOWN_NOISE_FACTOR * tol):
        verdict, may_regress, was_unknown = "inconclusive", True, True
    change.verdict, change.may_regress = verdict, may_regress
    change.unknown_noise = noise.unknown_noise_reason(change, min_history) if was_unknown else ""
    change.message = (describe_change(change, conf) + noise.noise_words(change, min_history, was_unknown, relative)
                      + extra + untrusted_note(saturated, contended, trusted_note))
    # Judged against the reference runs' noise, the baseline is one run of them: a level that drifted in
    # it is in their mean and spread, so only the candidates' own drift holds the check (else one
    # drifted baseline level blinds that level in every later comparison, whatever the history).
    drifts = dict(cmp.candidate.drifting) if change.noise == "history" else {**cmp.baseline.drifting, **cmp.candidate.drifting}
    hold_drifting(change, drifts)
    return was_unknown


def _baseline_drift_words(cmp: Comparison, reference_runs: int) -> None:
    """Reword the baseline's drift warnings for the levels judged against the reference runs' noise."""
    for level, drift in cmp.baseline.drifting.items():
        judged = [c for c in cmp.changes if c.level == level]
        if not judged or any(c.noise != "history" for c in judged):
            continue
        old, new = drift_warning(cmp.baseline.label, drift), drift_warning(cmp.baseline.label, drift, reference_runs)
        cmp.warnings = [new if w == old else w for w in cmp.warnings]


def _beyond_noise(c: _Check, joint_noise: joint.JointNoise, tol: float,
                  relative: bool) -> tuple[str, bool, str, bool]:
    """The verdict once the run-to-run noise is known (see :mod:`joint`): a regression is beyond the noise of
    all checks judged together *and* worse than the reference mean by more than the tolerance (the
    minimum effect worth failing for). The within-run interval is not asked again: every reference run's
    value carries its own within-run noise, so the run-to-run spread already holds it (and is floored by it).

    Returns (verdict, may_regress, words for the message, within the noise only): the last is True only
    for a change worse than the tolerance that the noise alone calls unchanged
    (:attr:`Change.within_noise_only`), not for one beyond the noise but within the tolerance."""
    z = c.noise.z
    alone = joint_noise.alone[c.slot] if 0 <= c.slot < len(joint_noise.alone) else z
    # relative to the reference mean (a throughput drop of x% is a badness of x%), or in points
    bad_vs_ref = c.noise.sign * (noise.to_relative(c.noise.deviation) if relative else c.noise.deviation)
    unit = "%" if relative else " pp"
    # a negative badness is better: said so, not "-13.7% worse" (z and alone keep their sign: worse positive)
    side = "worse" if bad_vs_ref >= 0 else "better"
    where = (f"; {abs(bad_vs_ref) * 100:.1f}{unit} {side} than the mean of the {c.noise.n} reference runs "
             f"(z {z:+.1f}, alone {alone:+.1f})")
    if c.count is not None and c.count.flagged(c.count_alpha) and c.count.rate > tol:
        what = "failed" if c.change.check == ERROR_RATE else "gave an invalid answer"
        return "regression", True, where + (
            f"; {c.count.bad} of the candidates' {c.count.trials} requests {what} against none of the reference runs' "
            f"{c.count.reference_trials} (exact p {c.count.p_text()}, counted in bursts of {c.count.burst:g})"), False
    if joint_noise.beyond(c.slot, z, c.noise.n):
        if bad_vs_ref > tol:
            return "regression", True, where, False
        return "unchanged", False, where + ", beyond the run-to-run noise but within the tolerance", False
    if joint_noise.better(c.slot, z, c.noise.n) and bad_vs_ref < -tol:
        return "improvement", False, where, False
    if bad_vs_ref > tol:  # unchanged, but only because the noise is wide: said so (Change.within_noise_only)
        return "unchanged", False, where + ", beyond the tolerance but within the run-to-run noise", True
    return "unchanged", False, "", False


#: A rate's value when nothing went wrong in a run (no failed request, every checked answer valid).
_BOUNDARY = {ERROR_RATE: 0.0, VALID_OUTPUT: 1.0}


def _point(summary: dict[str, Any] | None, change: Change, level: LevelKey, conf: float, folder: str = "") -> noise.RunPoint | None:
    if not summary:
        return None
    return noise.run_point(summary, change.check, change.kind, level, conf, folder)


def _group_value(points: list[noise.RunPoint], relative: bool) -> float:
    mean = statistics.fmean(p.value for p in points)
    return math.exp(mean) if relative else mean


def _f(x: float | None) -> float:
    return math.nan if x is None else float(x)


# -- capacity of groups ---------------------------------------------------------------------


def _group_capacity(cmp: Comparison, base: list[RunInput], cand: list[RunInput], rules: Rules) -> None:
    """Capacity of a group: the median run's, bracketed by the hull of every run's certain bracket
    (a drop is certain only when every candidate's bracket lies below every baseline's)."""
    summaries_b = [cmp.baseline.summary] + [s.summary or {} for s in base[1:]]
    summaries_c = [cmp.candidate.summary] + [s.summary or {} for s in cand[1:]]

    unit = cmp.candidate.unit
    key = CAPACITY_KEY[unit]  # capacity.concurrency, at a rate capacity.rate_rps (capacity.speedup)

    def group(summaries: list[dict[str, Any]]) -> tuple[dict[str, Any], CapacityBounds]:
        bounds = [CapacityBounds.from_levels(s.get("levels") or []) for s in summaries]
        caps = [c for c in ((s.get("capacity") or {}).get(key) for s in summaries) if isinstance(c, (int, float))]
        tested = [b.max_tested for b in bounds if b.max_tested is not None]
        lowest = [b.min_tested for b in bounds if b.min_tested is not None]
        hull = CapacityBounds(min(b.lower for b in bounds), max(b.upper for b in bounds), max(tested) if tested else None,
                              min(lowest) if lowest else None, unit)
        return {key: statistics.median_low(caps) if caps else None}, hull

    cap_b, bounds_b = group(summaries_b)
    cap_c, bounds_c = group(summaries_c)
    new = capacity_change(cap_b, bounds_b, cap_c, bounds_c, rules.gates(CAPACITY, CAPACITY))
    cmp.changes = [new if c.kind == CAPACITY else c for c in cmp.changes]
