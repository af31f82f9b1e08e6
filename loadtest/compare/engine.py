"""Baseline vs candidate: every check's change, with its interval and verdict, and the exit code.

The steps, in order:

1. **Like with like.** The workload fingerprints must match (see
   :mod:`fingerprint`); otherwise the runs are refused (exit 2) with one line
   naming what differs. A different SLO, model or tool version only warns.
2. **One set of rules.** Both runs are re-analyzed from their records under
   the *candidate's* SLO (the one in force now), so their capacities answer
   the same question.
3. **Per level and per check** (the SLO's percentiles, throughput and the
   error rate), at every concurrency both runs measured: the change and its
   bootstrap interval (requests resampled, see :mod:`delta`), at the
   confidence level the verdicts use. Judged by direction ("badness": latency
   up, throughput down, errors up) against the tolerance:

   * ``regression``: the whole interval is worse than the tolerance;
   * ``improvement``: the whole interval is better than the tolerance;
   * ``unchanged``: the whole interval is within the tolerance;
   * ``inconclusive``: anything else. Only an inconclusive check whose
     interval reaches past the *worse* tolerance (``may_regress``) can hold
     the gate; one that straddles only the better side cannot be a regression.

   A level where either run's load generator was saturated (its self-check
   flagged it: the numbers include the client's own delay), or its host was
   busy with other work (``host_contended``), cannot prove a regression: one
   there is reported as ``inconclusive``.

4. **Capacity**: a certain drop is a regression whatever the tolerance; a drop
   that depends on an uncertain level is inconclusive (see :func:`capacity_change`).
5. **Run-to-run noise, groups and stationarity** come on top (see :mod:`groups`,
   :mod:`noise`, :mod:`stationarity`): the command line always goes through
   :func:`groups.compare_groups`, which starts from this pair's comparison.
6. **Exit code**: 1 when a gated check regressed, else 6 when a gated check is
   inconclusive and may have regressed (``--inconclusive pass|fail`` maps it
   to 0 or 1), else 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any, Mapping

from loadtest.analysis.bootstrap import CONFIDENCE, rng_for
from loadtest.analysis.verdict import verdict_confidence
from loadtest.analysis.slo import PERCENTILES, SloSpec
from loadtest.compare import delta
from loadtest.compare.capacity import CapacityBounds, capacity_change
from loadtest.compare.fingerprint import differences, fingerprint_of_run, unverified_datasets
from loadtest.compare.inputs import RunInput, load_run
from loadtest.compare.rules import CAPACITY, ERROR_RATE, THROUGHPUT, Rules
from loadtest.compare.samples import LevelSamples, level_samples
from loadtest.compare.stationarity import hold_drifting
from loadtest.errors import InputError

Verdict = str  # "regression" | "improvement" | "unchanged" | "inconclusive"
EXIT_OK, EXIT_REGRESSION, EXIT_INCONCLUSIVE = 0, 1, 6


class IncomparableRuns(InputError):
    """The runs did not run the same workload (exit 2)."""


@dataclass
class Change:
    """One check at one level (or the capacity): the candidate against the baseline."""

    check: str  # "itl_ms.p95", "output_tokens_per_s", "error_rate" or "capacity"
    kind: str  # "latency" | "throughput" | "error_rate" | "capacity"
    level: int | None  # concurrency; None for capacity
    baseline: float | None
    candidate: float | None
    change: float | None  # relative (latency, throughput, capacity) or absolute (error rate)
    ci: tuple[float | None, float | None]
    relative: bool
    tolerance: float | None
    verdict: Verdict
    may_regress: bool
    gating: bool  # selected by --fail-on
    message: str = ""
    #: With run-to-run noise (see :mod:`groups`): ``ci`` is then the change's interval with both kinds
    #: of noise; ``within_ci`` the within-run one alone; ``noise_ci`` the prediction interval of the
    #: change when nothing changed, from ``noise_runs`` reference runs; ``noise`` says which applied
    #: ("history", "unknown" with too few runs, "" when not looked at).
    within_ci: tuple[float | None, float | None] | None = None
    noise_ci: tuple[float | None, float | None] | None = None
    noise_runs: int = 0
    noise: str = ""

    @property
    def name(self) -> str:
        """The JUnit test name: ``itl_ms.p95 @ 4 users`` or ``capacity``."""
        return self.check if self.level is None else f"{self.check} @ {self.level} users"

    @property
    def fails_gate(self) -> bool:
        return self.gating and self.verdict == "regression"

    @property
    def holds_gate(self) -> bool:
        """Inconclusive in a way that could hide a regression the gate watches."""
        return self.gating and self.verdict == "inconclusive" and self.may_regress


@dataclass
class Side:
    """One run as compared: where it came from and its summary under the common SLO."""

    label: str
    folder: str | None
    name: str
    started_wall: float | None
    summary: dict[str, Any]
    records: bool
    bounds: CapacityBounds
    #: Levels whose first and second halves differ (see :mod:`stationarity`): not compared.
    drifting: dict[int, Any] = field(default_factory=dict)


@dataclass
class Comparison:
    baseline: Side
    candidate: Side
    slo: dict[str, Any]
    fingerprint: dict[str, Any]
    rules: Rules
    changes: list[Change]
    warnings: list[str] = field(default_factory=list)
    confidence: float = CONFIDENCE
    #: The cost change (compare/cost.py), None unless both runs were priced.
    cost: dict[str, Any] | None = None
    #: Every run of each group (several with ``--repeat`` or several paths, see :mod:`groups`).
    baselines: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    #: Reference runs (history plus baselines) that gave the run-to-run noise; what decides a held check.
    history_runs: int = 0
    #: The level of each check's run-to-run prediction interval (see noise.family_confidence).
    noise_confidence: float | None = None
    hint: str = "longer levels would decide"

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.fails_gate]

    @property
    def held(self) -> list[Change]:
        return [c for c in self.changes if c.holds_gate]

    @property
    def outcome(self) -> str:
        """``regression``, ``inconclusive`` or ``pass``: what the gate decided."""
        if self.regressions:
            return "regression"
        if self.held:
            return "inconclusive"
        return "pass"

    @property
    def exit_code(self) -> int:
        outcome = self.outcome
        if outcome == "regression":
            return EXIT_REGRESSION
        if outcome == "inconclusive":
            return {"pass": EXIT_OK, "fail": EXIT_REGRESSION}.get(self.rules.inconclusive, EXIT_INCONCLUSIVE)
        return EXIT_OK

    @property
    def headline(self) -> str:
        """One sentence for every output."""
        n = len(self.changes)
        if self.regressions:
            worst = self.regressions[0]
            more = len(self.regressions) - 1
            tail = f" (and {more} more)" if more else ""
            return f"REGRESSION: {worst.message}{tail}."
        if self.held:
            first = self.held[0]
            more = len(self.held) - 1
            tail = f" (and {more} more)" if more else ""
            return f"INCONCLUSIVE: {first.message}{tail}; {self.hint}."
        better = sum(1 for c in self.changes if c.verdict == "improvement")
        extra = f", {better} improved" if better else ""
        return f"No regression: {n} checks within tolerance or better{extra}."


# -- the comparison ---------------------------------------------------------------------------


def compare_runs(baseline: Path | str, candidate: Path | str, rules: Rules, *, seed: int = 0,
                 args: tuple[str, str] = ("baseline", "candidate")) -> Comparison:
    """Compare two run folders (or summary.json files). Raises :class:`InputError` (exit 2).

    ``args`` name the two paths in messages (``--baseline`` when ``run`` compares).
    """
    base, cand = load_run(baseline, arg=args[0]), load_run(candidate, arg=args[1])
    fp_b, fp = side_fingerprint(base, "baseline"), side_fingerprint(cand, "candidate")
    require_same_workload(fp_b, fp)
    warnings: list[str] = []
    if unverified_datasets(fp_b, fp):
        warnings.append("a dataset's hash is known for only one run, so its content could not be checked")

    slo_b, slo_c = _slo(base), _slo(cand)
    if slo_b.to_dict() != slo_c.to_dict():
        warnings.append(
            f"the SLO differs (baseline {_slo_text(slo_b)}; candidate {_slo_text(slo_c)}): "
            + ("both runs are judged under the candidate's" if base.has_records else
               "the baseline has no records, so its capacity stays judged under its own SLO")
        )
    if base.model != cand.model:
        warnings.append(f"the model name differs: baseline {base.model!r}, candidate {cand.model!r}")
    if base.tool_version != cand.tool_version:
        warnings.append(f"the loadtest version differs: baseline {base.tool_version}, candidate {cand.tool_version}")

    confidence = _confidence(cand)
    if base.has_records and abs(_confidence(base) - confidence) > 1e-9:
        warnings.append(f"the verdict confidence differs (baseline {_confidence(base):.3g}, candidate "
                        f"{confidence:.3g}): both runs are judged at the candidate's")
    side_b, samples_b = _judge(base, slo_c, confidence, seed, warnings, rules.tolerance)
    side_c, samples_c = _judge(cand, slo_c, confidence, seed, warnings, rules.tolerance)
    latency_checks = _latency_checks(slo_b, slo_c)
    changes = [
        capacity_change(side_b.summary.get("capacity") or {}, side_b.bounds,
                        side_c.summary.get("capacity") or {}, side_c.bounds, rules.gates(CAPACITY, CAPACITY))
    ]
    changes += _level_changes(side_b, side_c, samples_b, samples_c, latency_checks, rules, confidence, seed, warnings)
    changes.sort(key=_severity)
    from loadtest.compare.cost import cost_change

    cost = cost_change(side_b.summary, side_c.summary)
    return Comparison(side_b, side_c, slo_c.to_dict(), fp, rules, changes, warnings, confidence, cost)


def _confidence(side: RunInput) -> float:
    """The confidence the run's verdicts use (run.json, else its summary, else the default)."""
    if side.run.get("verdict_confidence") is not None:
        return verdict_confidence(side.run)
    value = (side.summary or {}).get("confidence")
    return verdict_confidence({"verdict_confidence": value}) if value is not None else CONFIDENCE


def side_fingerprint(side: RunInput, which: str) -> dict[str, Any]:
    """A run's workload fingerprint; :class:`IncomparableRuns` when nothing says what it ran."""
    if not side.scenario and not side.run.get("compare_fingerprint") and not side.run.get("workload_fingerprint") and not (side.summary or {}).get("fingerprint"):
        raise IncomparableRuns(
            f"incomparable runs: the {which} ({side.label}) says nothing about its workload "
            "(no run.json scenario and no fingerprint in summary.json)"
        )
    return fingerprint_of_run(side.run, side.summary)


def require_same_workload(fp_b: Mapping[str, Any], fp_c: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse (exit 2, one line naming every difference) unless the fingerprints match."""
    diff = differences(fp_b, fp_c)
    if diff:
        raise IncomparableRuns(f"{prefix}incomparable runs, the workload differs: " + "; ".join(diff))


def _slo(side: RunInput) -> SloSpec:
    """The SLO the run was last judged by: its summary's (``loadtest analyze --slo`` may have
    changed it), else its scenario's."""
    summary_slo = (side.summary or {}).get("slo")
    if isinstance(summary_slo, Mapping):
        return SloSpec.from_dict(summary_slo)
    return SloSpec.from_dict(side.scenario.get("slo"))


def _slo_text(slo: SloSpec) -> str:
    parts = [f"{c.name}≤{c.limit:g}" for c in slo.checks]
    if slo.max_error_rate is not None:
        parts.append(f"error_rate≤{slo.max_error_rate:g}")
    return ", ".join(parts) or "none"


def _judge(
    side: RunInput, slo: SloSpec, confidence: float, seed: int, warnings: list[str], tolerance: float
) -> tuple[Side, dict[int, LevelSamples]]:
    """The run's summary under ``slo`` (re-analyzed from its records), its bootstrap samples and
    its drifting levels."""
    from loadtest.compare.stationarity import drifting_levels  # scipy: only with records

    samples: dict[int, LevelSamples] = {}
    drifting: dict[int, Any] = {}
    if side.has_records:
        from loadtest.analysis import analyze
        from loadtest.report.summary import summary_dict

        analysis = analyze(side.requests, side.run, slo, seed=seed, confidence=confidence)
        summary = summary_dict(analysis)
        samples = level_samples(side.requests, analysis.run, analysis.requests)
        drifting = drifting_levels(side.requests, analysis.run, analysis.requests, tolerance)
        warnings += [f"{side.label}: {d.text()}; its checks are inconclusive" for d in drifting.values()]
    else:
        summary = dict(side.summary or {})
        warnings.append(
            f"{side.label}: no records, so its changes' intervals are approximated from its summary's intervals"
        )
    bounds = CapacityBounds.from_levels(summary.get("levels") or [])
    return (
        Side(side.label, str(side.folder) if side.folder else None, side.name, side.started_wall, summary,
             side.has_records, bounds, drifting),
        samples,
    )


def _latency_checks(*slos: SloSpec) -> list[str]:
    names: list[str] = []
    for slo in slos:
        for check in slo.checks:
            if check.name not in names:
                names.append(check.name)
    return names


def _levels_by_concurrency(summary: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for level in summary.get("levels") or []:
        if level.get("status") == "no_data" or level.get("concurrency") is None:
            continue
        previous = out.get(int(level["concurrency"]))
        if previous is None or (level.get("requests") or 0) > (previous.get("requests") or 0):
            out[int(level["concurrency"])] = level
    return out


def _level_changes(
    side_b: Side,
    side_c: Side,
    samples_b: dict[int, LevelSamples],
    samples_c: dict[int, LevelSamples],
    latency_checks: list[str],
    rules: Rules,
    confidence: float,
    seed: int,
    warnings: list[str],
) -> list[Change]:
    levels_b = _levels_by_concurrency(side_b.summary)
    levels_c = _levels_by_concurrency(side_c.summary)
    common = sorted(set(levels_b) & set(levels_c))
    only = sorted(set(levels_b) ^ set(levels_c))
    if only:
        warnings.append(
            "levels measured by one run only are not compared: " + ", ".join(str(c) for c in only)
        )
    saturated = [c for c in common if levels_b[c].get("client_saturated") or levels_c[c].get("client_saturated")]
    if saturated:
        warnings.append(
            "the load generator was saturated at " + ", ".join(str(c) for c in saturated)
            + " users in at least one run: changes there may be the client's, not the server's"
        )
    contended = [c for c in common if levels_b[c].get("host_contended") or levels_c[c].get("host_contended")]
    if contended:
        warnings.append(
            "the host running the load generator was busy with other work at " + ", ".join(str(c) for c in contended)
            + " users in at least one run: changes there may be the host's, not the server's"
        )
    out: list[Change] = []
    for conc in common:
        lb, lc = levels_b[conc], levels_c[conc]
        sb, sc = samples_b.get(conc), samples_c.get(conc)
        for check in latency_checks + [THROUGHPUT, ERROR_RATE]:
            change = _level_change(check, conc, lb, lc, sb, sc, rules, confidence, seed)
            if change is not None:
                hold_drifting(change, {**side_b.drifting, **side_c.drifting})
                out.append(change)
    return out


def _level_change(
    check: str,
    conc: int,
    lb: Mapping[str, Any],
    lc: Mapping[str, Any],
    sb: LevelSamples | None,
    sc: LevelSamples | None,
    rules: Rules,
    confidence: float,
    seed: int,
) -> Change | None:
    kind = "latency" if check not in (THROUGHPUT, ERROR_RATE) else ("throughput" if check == THROUGHPUT else ERROR_RATE)
    rng_b = rng_for(seed, "compare-baseline", conc, check)
    rng_c = rng_for(seed, "compare-candidate", conc, check)
    tol = rules.tolerance_for(check)
    if kind == "latency":
        metric, _, pct = check.partition(".")
        vb, vc = _point(lb, metric, pct), _point(lc, metric, pct)
        if math.isnan(vb) or math.isnan(vc):
            return None  # a metric without samples in one run (e.g. TPOT of one-token replies)
        point = float(delta.relative_change(vc, vb))
        if sb is not None and sc is not None:
            q = PERCENTILES[pct]
            reps = delta.relative_change(
                delta.percentile_replicates(sc.latency[metric], q, rng_c),
                delta.percentile_replicates(sb.latency[metric], q, rng_b),
            )
            ci = delta.central_interval(reps, confidence)
        else:
            ci = _approx_relative(vb, vc, _ci(lb, metric, pct), _ci(lc, metric, pct), confidence)
        badness = (point, ci[0], ci[1])
    elif kind == "throughput":
        vb, vc = _num(lb.get(THROUGHPUT)), _num(lc.get(THROUGHPUT))
        if math.isnan(vb) or math.isnan(vc):
            return None
        point = float(delta.relative_change(vc, vb))
        if sb is not None and sc is not None:
            reps = delta.relative_change(
                delta.throughput_replicates(vc, sc.served_e2e_ms, sc.served_tokens, rng_c),
                delta.throughput_replicates(vb, sb.served_e2e_ms, sb.served_tokens, rng_b),
            )
            ci = delta.central_interval(reps, confidence)
        else:
            ci = (math.nan, math.nan)  # summaries hold no throughput interval
        badness = (-point, -ci[1], -ci[0])
        if math.isnan(ci[0]) and abs(point) <= tol:
            badness = (-point, -point, -point)  # no interval, but the change itself is within tolerance
    else:
        vb, vc = _num(lb.get("error_rate")), _num(lc.get("error_rate"))
        if math.isnan(vb) or math.isnan(vc):
            return None
        point = vc - vb
        if sb is not None and sc is not None:
            reps = delta.share_replicates(sc.failed, rng_c) - delta.share_replicates(sb.failed, rng_b)
            ci = delta.central_interval(reps, confidence)
        else:
            ci = _approx_absolute(_pair(lb.get("error_rate_ci")), _pair(lc.get("error_rate_ci")), point, confidence)
        badness = (point, ci[0], ci[1])
    verdict, may_regress = classify(badness[1], badness[2], tol)
    saturated = bool(lb.get("client_saturated") or lc.get("client_saturated"))
    contended = bool(lb.get("host_contended") or lc.get("host_contended"))
    if (saturated or contended) and verdict == "regression":
        verdict = "inconclusive"  # the numbers include the load generator's own delay, or the busy host's
    change = Change(
        check=check, kind=kind, level=conc, baseline=vb, candidate=vc, change=point, ci=ci,
        relative=kind != ERROR_RATE, tolerance=tol, verdict=verdict, may_regress=may_regress,
        gating=rules.gates(check, kind),
    )
    change.message = describe_change(change, confidence) + untrusted_note(saturated, contended)
    return change


def untrusted_note(saturated: bool, contended: bool) -> str:
    """What a check's message adds when a level's numbers include the client's or the host's delay."""
    if saturated:
        return "; the load generator was saturated at this level, so a slowdown here may be the client's"
    if contended:
        return "; the host running the load generator was busy at this level, so a slowdown here may be the host's"
    return ""


def classify(bad_lo: float, bad_hi: float, tolerance: float) -> tuple[Verdict, bool]:
    """Verdict and ``may_regress`` from the interval of the *badness* (worse is positive)."""
    if math.isnan(bad_lo) or math.isnan(bad_hi):
        return "inconclusive", True
    if bad_lo > tolerance:
        return "regression", True
    if bad_hi < -tolerance:
        return "improvement", False
    if bad_lo >= -tolerance and bad_hi <= tolerance:
        return "unchanged", False
    return "inconclusive", bad_hi > tolerance


# -- values from summaries -------------------------------------------------------------------


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _pair(value: Any) -> tuple[float, float]:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return (_num(value[0]), _num(value[1]))
    return (math.nan, math.nan)


def _point(level: Mapping[str, Any], metric: str, pct: str) -> float:
    """A percentile from a summary level; null with failed samples means +inf (failures reach it)."""
    stats = level.get(metric) or {}
    value = stats.get(pct)
    if value is None:
        return math.inf if (stats.get("n") or 0) > 0 and (stats.get("n_failed") or 0) > 0 else math.nan
    return float(value)


def _ci(level: Mapping[str, Any], metric: str, pct: str) -> tuple[float, float]:
    return _pair(((level.get(metric) or {}).get("ci") or {}).get(pct))


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _approx_relative(
    vb: float, vc: float, ci_b: tuple[float, float], ci_c: tuple[float, float], confidence: float
) -> tuple[float, float]:
    """Without records: the relative change's interval by the delta method from both intervals."""
    z = _z(confidence)
    if not all(math.isfinite(x) for x in (vb, vc, *ci_b, *ci_c)) or vb <= 0 or vc <= 0:
        return (math.nan, math.nan)
    sb, sc = (ci_b[1] - ci_b[0]) / (2 * z), (ci_c[1] - ci_c[0]) / (2 * z)
    ratio = vc / vb
    sd = ratio * math.sqrt((sb / vb) ** 2 + (sc / vc) ** 2)
    return (ratio - 1 - z * sd, ratio - 1 + z * sd)


def _approx_absolute(
    ci_b: tuple[float, float], ci_c: tuple[float, float], point: float, confidence: float
) -> tuple[float, float]:
    z = _z(confidence)
    if not all(math.isfinite(x) for x in (*ci_b, *ci_c)):
        return (math.nan, math.nan)
    sd = math.hypot((ci_b[1] - ci_b[0]) / (2 * z), (ci_c[1] - ci_c[0]) / (2 * z))
    return (point - z * sd, point + z * sd)


# -- words ----------------------------------------------------------------------------------


def _fmt_value(kind: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float) and math.isinf(value):
        return "∞ (failures)"
    if kind == "latency":
        return f"{value:.1f} ms" if abs(value) < 1000 else f"{value:,.0f} ms"
    if kind == "throughput":
        return f"{value:,.1f} tok/s"
    if kind == ERROR_RATE:
        return f"{value * 100:.2f}%"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def fmt_change(change: Change) -> str:
    """``+13.2% [+11.0%, +15.1%]`` (percentage points for the error rate)."""
    unit = "%" if change.relative else " pp"

    def f(x: float | None) -> str:
        if x is None or math.isnan(x):
            return "?"
        if math.isinf(x):
            return "+∞" if x > 0 else "−∞"
        return f"{x * 100:+.1f}{unit}"

    lo, hi = change.ci
    if change.kind == CAPACITY:
        return f(change.change)
    return f"{f(change.change)} [{f(lo)}, {f(hi)}]"


def describe_change(change: Change, confidence: float = CONFIDENCE) -> str:
    """``p95 ITL at 4 users: 90.0 ms → 102.1 ms, +13.4% [+12.9%, +14.0%] (tolerance 5%)``."""
    if change.kind == CAPACITY:
        return change.message
    tol = "" if change.tolerance is None else (
        f"tolerance {change.tolerance * 100:g}{'%' if change.relative else ' pp'}"
    )
    return (
        f"{change.check} at {change.level} users: {_fmt_value(change.kind, change.baseline)} → "
        f"{_fmt_value(change.kind, change.candidate)}, {fmt_change(change)} at {confidence * 100:g}% ({tol})"
    )


_ORDER = {"regression": 0, "inconclusive": 1, "improvement": 2, "unchanged": 3}


def _severity(change: Change) -> tuple:
    held = 0 if change.holds_gate or change.fails_gate else 1
    return (_ORDER.get(change.verdict, 9), held, change.level is not None, change.level or 0, change.check)

