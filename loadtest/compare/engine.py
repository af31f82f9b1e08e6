"""Baseline vs candidate: every check's change, with its interval and verdict, and the exit code.

The steps, in order:

1. **Like with like.** Both runs must be of one load mode (levels of users, of rates,
   or of trace speedups: :func:`alike.require_same_mode`) and their workload fingerprints must
   match (see :mod:`loadtest.fingerprint`); otherwise the runs are refused (exit 2) with
   one line naming what differs. A different SLO, model or tool version only warns.
2. **One set of rules.** Both runs are re-analyzed from their records under
   the *candidate's* SLO (the one in force now), so their capacities answer
   the same question.
3. **Per level and per check** (the SLO's percentiles, throughput and the
   error rate), at every level both runs measured (matched by users, or by the
   nominal rate or speedup: :mod:`level_keys`): the change and its
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

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from loadtest.analysis.bootstrap import CONFIDENCE
from loadtest.analysis.verdict import verdict_confidence
from loadtest.analysis.slo import SloSpec
from loadtest.analysis.stop import incomplete_words
from loadtest.compare.capacity import CapacityBounds, capacity_change
from loadtest.compare.class_checks import class_checks, class_slos
from loadtest.compare.change import Change, severity, tolerances_worse
from loadtest.compare.cost import cost_change
from loadtest.fingerprint import unverified_datasets
from loadtest.compare.alike import (refuse_the_same_run, require_a_common_level, require_same_mode, require_same_workload,
                                    side_fingerprint)
from loadtest.compare.inputs import RunInput, load_run
from loadtest.compare.level_keys import USERS, LevelKey, unit_of
from loadtest.compare.rules import CAPACITY, Rules
from loadtest.compare.level_changes import level_changes
from loadtest.compare.noise import MIN_HISTORY_RUNS
from loadtest.compare.samples import LevelSamples, level_samples
from loadtest.staged_paths import shown

EXIT_OK, EXIT_REGRESSION, EXIT_INCONCLUSIVE = 0, 1, 6


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
    drifting: dict[LevelKey, Any] = field(default_factory=dict)
    #: What its levels count (:mod:`level_keys`): ``users``, ``req/s`` (open loop) or ``×`` (trace replay).
    unit: str = USERS


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
    #: Reference runs needed to know the run-to-run noise (``--min-history``): fewer, and it is unknown.
    min_history: int = MIN_HISTORY_RUNS
    #: The level of each check's run-to-run prediction interval (see compare/joint.py: the single-check threshold as a t level).
    noise_confidence: float | None = None
    #: What the gate could catch with its reference runs (:class:`loadtest.compare.reach.Reach` as a dict);
    #: None without run-to-run noise to judge by.
    detectable: dict[str, Any] | None = None
    hint: str = "longer levels would decide"
    #: The compared runs that did not complete (run.json ``complete: false``), as "candidate runs/x":
    #: their missing levels are the stop's doing, which no longer level or history would decide.
    incomplete: list[str] = field(default_factory=list)

    @property
    def unit(self) -> str:
        """What the compared levels count (:mod:`level_keys`): ``users``, ``req/s`` or ``×`` (one mode per comparison)."""
        return self.candidate.unit

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.fails_gate]

    @property
    def held(self) -> list[Change]:
        return [c for c in self.changes if c.holds_gate]

    @property
    def within_noise_only(self) -> list[Change]:
        """Unchanged only because the run-to-run noise is wider than their change (:attr:`Change.within_noise_only`)."""
        return [c for c in self.changes if c.within_noise_only]

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
            # a held capacity first (as every list orders it), else the change furthest past its
            # tolerance: without a history that is the one only the unknown noise holds (a +198%
            # ITL p95 at the top level, not a +9% at the level below whose interval straddles 5%)
            capacity = [c for c in self.held if c.level is None]
            first = capacity[0] if capacity else max(self.held, key=tolerances_worse)
            more = len(self.held) - 1
            tail = f" (and {more} more)" if more else ""
            return f"INCONCLUSIVE: {first.message}{tail}; {self.hint}."
        better = sum(1 for c in self.changes if c.verdict == "improvement")
        extra = f", {better} improved" if better else ""
        # what each check's verdict rests on, counted apart: a change that only wide noise calls
        # unchanged, or a level not compared, is not "within tolerance"
        noise_only = len(self.within_noise_only)
        undecided = sum(1 for c in self.changes if c.verdict == "inconclusive")
        # a regression of a check that --fail-on does not gate: worse, not "within tolerance"
        ungated = sum(1 for c in self.changes if c.verdict == "regression")
        if not noise_only and not undecided and not ungated:
            return f"No regression: {n} checks within tolerance or better{extra}."
        within = n - noise_only - undecided - better - ungated
        parts = [f"{within} of {n} checks within tolerance"]
        if ungated:
            parts.append(f"{ungated} worse than the tolerance but not gated (--fail-on)")
        if noise_only:
            parts.append(f"{noise_only} worse by more than the tolerance but within the run-to-run noise "
                         f"(more reference runs in --history narrow it)")
        if undecided:
            parts.append(f"{undecided} inconclusive without holding the gate")
        return f"No regression: {', '.join(parts)}{extra}."


# -- the comparison ---------------------------------------------------------------------------


def compare_runs(baseline: Path | str, candidate: Path | str, rules: Rules, *, seed: int = 0,
                 args: tuple[str, str] = ("baseline", "candidate"), medians: bool = False) -> Comparison:
    """Compare two run folders (or summary.json files). Raises :class:`InputError` (exit 2).

    ``args`` name the two paths in messages (``--baseline`` when ``run`` compares).
    ``medians``: also judge each SLO metric's p50 at every level (see :func:`_latency_checks`).
    """
    base, cand = load_run(baseline, arg=args[0]), load_run(candidate, arg=args[1])
    require_same_mode((base, args[0]), (cand, args[1]))  # before the fingerprint, whose levels differ too
    fp_b, fp = side_fingerprint(base, "baseline"), side_fingerprint(cand, "candidate")
    require_same_workload(fp_b, fp)
    refuse_the_same_run(base, cand, args)  # after the workload: two runs of other workloads are no copies
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
    classes_b, classes_c = class_slos(base, slo_b), class_slos(cand, slo_c)
    # a class that holds the top-level SLO on both sides is said by the SLO's own warning above
    differ = [name for name in classes_c if name in classes_b and classes_b[name].to_dict() != classes_c[name].to_dict()
              and not (classes_b[name].to_dict() == slo_b.to_dict() and classes_c[name].to_dict() == slo_c.to_dict())]
    if differ:  # not in the fingerprint (the SLO judges the work, it is not the work): said, and one SLO judges both
        warnings.append("a request class's SLO differs (" + "; ".join(
            f"{name}: baseline {_slo_text(classes_b[name])}, candidate {_slo_text(classes_c[name])}" for name in differ)
            + "): " + ("both runs are judged under the candidate's" if base.has_records else
                       "the baseline has no records, so its capacity stays judged under its own SLO"))
    if base.model != cand.model:
        warnings.append(f"the model name differs: baseline {base.model!r}, candidate {cand.model!r}")
    if base.tool_version != cand.tool_version:
        warnings.append(f"the loadtest version differs: baseline {base.tool_version}, candidate {cand.tool_version}")

    confidence = _confidence(cand)
    if base.has_records and abs(_confidence(base) - confidence) > 1e-9:
        warnings.append(f"the verdict confidence differs (baseline {_confidence(base):.3g}, candidate "
                        f"{confidence:.3g}): both runs are judged at the candidate's")
    side_b, samples_b = _judge(base, slo_c, confidence, seed, warnings, rules.tolerance, classes_c or None)
    side_c, samples_c = _judge(cand, slo_c, confidence, seed, warnings, rules.tolerance, classes_c or None)
    require_a_common_level(side_c.unit, (f"{args[0]} {base.label}", side_b.summary), (f"{args[1]} {cand.label}", side_c.summary))
    latency_checks = _latency_checks(slo_b, slo_c, medians=medians) + class_checks(
        (slo_b, classes_b), (slo_c, classes_c))
    changes = [
        capacity_change(side_b.summary.get("capacity") or {}, side_b.bounds,
                        side_c.summary.get("capacity") or {}, side_c.bounds, rules.gates(CAPACITY, CAPACITY))
    ]
    changes += level_changes(side_b, side_c, samples_b, samples_c, latency_checks, rules, confidence, seed, warnings)
    changes.sort(key=severity)

    cost = cost_change(side_b.summary, side_c.summary, side_c.unit)
    cmp = Comparison(side_b, side_c, slo_c.to_dict(), fp, rules, changes, warnings, confidence, cost)
    say_incomplete(cmp, ((base, args[0]), (cand, args[1])))
    return cmp


def say_incomplete(cmp: Comparison, sides: Sequence[tuple[RunInput, str]]) -> None:
    """Warn of a compared run that did not complete, and say that it, not the levels' length, left the
    gate undecided: an interrupted candidate read "longer levels would decide". Warn of a warm-up
    run too, which gate.md says is never compared, and which compare took without a word."""
    for side, arg in sides:
        if side.run.get("complete") is False:
            cmp.incomplete.append(f"{arg} {side.label}")
            cmp.warnings.append(f"{arg} {side.label}: {incomplete_words(side.run)}")
        if side.run.get("warmup_run"):  # history never counts one; a compare given one says so
            cmp.warnings.append(f"{arg} {side.label} is a warm-up run (run --warmup-run): the one run made to warm "
                                "the server up, not to be judged; compare the runs made after it")
    if cmp.incomplete:
        cmp.hint = f"{' and '.join(cmp.incomplete)} did not complete: compare runs that did"


def _confidence(side: RunInput) -> float:
    """The confidence the run's verdicts use (run.json, else its summary, else the default)."""
    if side.run.get("verdict_confidence") is not None:
        return verdict_confidence(side.run)
    value = (side.summary or {}).get("confidence")
    return verdict_confidence({"verdict_confidence": value}) if value is not None else CONFIDENCE


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
    if slo.min_valid_output_rate is not None:
        parts.append(f"valid_output_rate≥{slo.min_valid_output_rate:g}")
    return ", ".join(parts) or "none"


def _judge(
    side: RunInput, slo: SloSpec, confidence: float, seed: int, warnings: list[str], tolerance: float,
    class_slos: Mapping[str, SloSpec] | None = None,
) -> tuple[Side, Callable[[], dict[LevelKey, LevelSamples]] | None]:
    """The run's summary under ``slo`` (re-analyzed from its records) with its drifting levels, and
    what makes its bootstrap samples (None without records).

    The samples are made later, when :func:`level_changes` draws this run's replicates: a run's ITL
    samples are one per token, so only one run's are held at a time, and never while a run is analyzed.
    """
    from loadtest.compare.stationarity import drift_warning, drifting_levels  # pandas: only with records

    samples: Callable[[], dict[LevelKey, LevelSamples]] | None = None
    drifting: dict[LevelKey, Any] = {}
    if side.has_records:
        # Start-up time: the command line imports this module for every command (it builds the
        # parsers); the analysis and the summary (pandas, and plotly through report/) load only here.
        from loadtest.analysis import analyze
        from loadtest.analysis.chunk_lists import arrow_source
        from loadtest.report.summary import summary_dict

        # the chunk lists are read twice, a batch at a time: once by the analysis (cut at the
        # holds' ends), once for the bootstrap's ITL samples (as stored); never whole
        chunks = arrow_source(side.chunk_batches)
        analysis = analyze(side.scalars, side.run, slo, seed=seed, confidence=confidence, chunks=chunks,
                           class_slos=class_slos)
        summary = summary_dict(analysis)
        scalars, run, frame = side.scalars, analysis.run, analysis.requests
        samples = partial(level_samples, scalars, run, frame, chunks)  # the analysis itself is dropped
        drifting = drifting_levels(scalars, run, frame, tolerance)
        warnings += [drift_warning(side.label, d) for d in drifting.values()]
    else:
        summary = dict(side.summary or {})
        warnings.append(
            f"{side.label}: no records, so its changes' intervals are approximated from its summary's intervals"
        )
    bounds = CapacityBounds.from_levels(summary.get("levels") or [])
    unit = unit_of(summary.get("levels") or []) if summary.get("levels") else side.unit
    return (
        Side(side.label, shown(side.folder) if side.folder else None, side.name, side.started_wall, summary,
             side.has_records, bounds, drifting, unit),
        samples,
    )


def _latency_checks(*slos: SloSpec, medians: bool = False) -> list[str]:
    """The latency checks the gate judges at each level: the SLOs' percentiles, and with ``medians`` each
    SLO metric's p50 too.

    Why the medians: a server that got slower moves every percentile, but from run to run a p95 of
    a few seconds of requests moves 20–30% on its own, a median 6–9% (the mock with 5% drift on a
    shared 2-core machine; ``benchmarks/RESULTS.md``). Judged against the run-to-run noise of a
    history, the medians are the steadier witnesses of the same slowdown: on the same kept runs
    they raised the detection of a 20% slowdown from 3 to 6 of 12 with no false alarm added. They
    join only when there is run-to-run noise to judge them by (at least ``--min-history`` reference
    runs: the baselines and the history's; :func:`loadtest.compare.groups.compare_groups` counts
    them): judged by within-run intervals alone, a median's narrow interval would turn every
    run's drift into an alarm.
    """
    names: list[str] = []
    for slo in slos:
        for check in slo.checks:
            if check.name not in names:
                names.append(check.name)
    if medians:
        for slo in slos:
            for check in slo.checks:
                median = f"{check.metric}.p50"
                if median not in names:
                    names.append(median)
    return names


