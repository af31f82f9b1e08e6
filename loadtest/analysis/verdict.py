"""SLO verdicts: does one level meet each objective, and how sure are we?

A check compares a point estimate *and* its interval with the limit:

* latency percentile: ``pass`` when the value and the whole interval are at or
  under the limit, ``fail`` when the value and the whole interval are over it,
  ``uncertain`` when the interval straddles the limit. More samples (longer
  levels) turn an uncertain verdict into a definite one;
* error budget: ``fail`` when the observed rate exceeds ``max_error_rate`` and
  the Wilson interval's lower bound does too; ``uncertain`` when it exceeds the
  budget but the excess is within noise; ``pass`` when the observed rate is
  within budget. The pass side deliberately uses the point estimate: showing
  with 95% confidence that a rate is under 1% needs ≥ 380 error-free requests
  per level (the Wilson upper bound at 0 failures is 3.84/(n + 3.84)), which
  would make nearly every short level "uncertain" without saying anything about
  the endpoint. The interval is still reported, and ``low_n`` flags a level
  with fewer requests than 1 / max_error_rate;
* valid-output floor (``min_valid_output_rate``): the mirror image, ``fail``
  when the share of valid structured outputs is under the floor and so is the
  Wilson interval's upper bound, ``uncertain`` when it is under but within
  noise, ``pass`` when it is at or above. Judged only where answers were
  checked: a class that asks for no structure, or a level whose every request
  failed (the error budget's case), has no such check;
* no samples: ``no_data``.

**The confidence level.** A run with a fixed level duration judges each level
once, at 95%. A run whose levels end as soon as they are decided (and run
longer while they are not) looks at each level up to K times on a fixed
schedule (:mod:`loadtest.analysis.decide`); every look is a chance to be
fooled by noise, so each look uses ``1 − 0.05 / K`` (Bonferroni): the chance
that *any* look of a level decides wrongly stays within 5%. run.json records
that level as ``verdict_confidence`` and the analysis (and a later
``loadtest analyze``) judges with it, so the saved run gives the answer the
run itself acted on.

Every check also says *why* it is undecided (``reason``): ``too few
samples`` when the percentile cannot be bounded from above with this many
samples (p95 from fewer than 20 is the maximum), or, for a value over its
limit, from below (a median of fewer than 8 at 98.75%: all of them can lie
above the true median too often, :func:`loadtest.quantiles.lower_unbounded`),
else ``interval straddles the limit``.

A level's status is ``fail`` if any check fails, else ``uncertain`` if any
check is uncertain or has no data, else ``pass``; a level where no request
started inside its measured window is ``no_data``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from loadtest.quantiles import low_n
from loadtest.analysis.results import Check, CheckVerdict, LevelResult, LevelStatus
from loadtest.analysis.slo import SloCheck, SloSpec

ERROR_RATE_CHECK = "error_rate"
VALID_OUTPUT_CHECK = "valid_output_rate"
#: A rate level whose queue grew (:mod:`loadtest.analysis.sustained`).
SUSTAINED_CHECK = "sustained_rate"
#: The confidence of a run judged once per level.
DEFAULT_CONFIDENCE = 0.95
TOO_FEW = "too few samples"
STRADDLES = "interval straddles the limit"


def verdict_confidence(run: Mapping[str, Any]) -> float:
    """The confidence a run's levels are judged at (run.json ``verdict_confidence``)."""
    value = run.get("verdict_confidence")
    try:
        value = float(value)
    except (TypeError, ValueError):
        return DEFAULT_CONFIDENCE
    return value if 0.5 <= value < 1.0 else DEFAULT_CONFIDENCE


def interval_verdict(value: float, ci: tuple[float, float], limit: float) -> CheckVerdict:
    """Compare a value and its interval with an upper limit (see module doc)."""
    lo, hi = ci
    if math.isnan(value):
        return "no_data"
    if math.isnan(lo) or math.isnan(hi):
        lo = hi = value
    if value <= limit and hi <= limit:
        return "pass"
    if value > limit and lo > limit:
        return "fail"
    return "uncertain"


def latency_check(level: LevelResult, slo_check: SloCheck) -> Check:
    stats = level.metric(slo_check.metric)
    value = stats.percentile(slo_check.percentile)
    ci = stats.ci.get(slo_check.percentile, (math.nan, math.nan))
    verdict: CheckVerdict = "no_data" if stats.n == 0 else interval_verdict(value, ci, slo_check.limit)
    reason = ""
    if verdict == "uncertain":
        # too few either way: no upper bound under a passing value, or (quantiles.lower_unbounded) a lower
        # bound of 0 under a failing one
        few = math.isinf(ci[1]) if value <= slo_check.limit else ci[0] <= 0.0 < value
        reason = TOO_FEW if few else STRADDLES
    return Check(
        name=slo_check.name,
        metric=slo_check.metric,
        percentile=slo_check.percentile,
        value=value,
        ci=ci,
        limit=slo_check.limit,
        verdict=verdict,
        n=stats.n,
        low_n=low_n(stats.n, slo_check.q),
        reason=reason,
    )


def error_rate_check(level: LevelResult, max_error_rate: float) -> Check:
    n = level.requests
    rate = level.error_rate
    lo, _hi = level.error_rate_ci
    verdict: CheckVerdict
    if n == 0:
        verdict = "no_data"
    elif rate <= max_error_rate:
        verdict = "pass"
    elif lo > max_error_rate:
        verdict = "fail"
    else:
        verdict = "uncertain"
    return Check(
        name=ERROR_RATE_CHECK,
        metric=ERROR_RATE_CHECK,
        percentile=None,
        value=rate,
        ci=level.error_rate_ci,
        limit=max_error_rate,
        verdict=verdict,
        n=n,
        low_n=max_error_rate > 0 and n * max_error_rate < 1.0,
        reason=STRADDLES if verdict == "uncertain" else "",
    )


def valid_output_check(level: LevelResult, minimum: float) -> Check | None:
    """The valid-output floor at ``level``; None where no answer was checked (see the module doc)."""
    n = level.valid_output_checked
    rate = level.valid_output_rate
    if n == 0 or rate is None:
        return None
    ci = level.valid_output_ci or (math.nan, math.nan)
    verdict: CheckVerdict
    if rate >= minimum:
        verdict = "pass"
    elif math.isfinite(ci[1]) and ci[1] < minimum:
        verdict = "fail"
    else:
        verdict = "uncertain"
    return Check(
        name=VALID_OUTPUT_CHECK,
        metric=VALID_OUTPUT_CHECK,
        percentile=None,
        value=rate,
        ci=ci,
        limit=minimum,
        verdict=verdict,
        n=n,
        # one invalid answer among fewer than 1 / (1 - minimum) already puts the share under the floor
        low_n=minimum < 1.0 and n * (1.0 - minimum) < 1.0,
        reason=STRADDLES if verdict == "uncertain" else "",
    )


def rate_checks(level: LevelResult, slo: SloSpec) -> list[Check]:
    """The SLO's rate checks at ``level``: the error budget and the valid-output floor, where set."""
    checks = []
    if slo.max_error_rate is not None:
        checks.append(error_rate_check(level, slo.max_error_rate))
    if slo.min_valid_output_rate is not None:
        valid = valid_output_check(level, slo.min_valid_output_rate)
        checks += [valid] if valid is not None else []
    return checks


def evaluate_level(level: LevelResult, slo: SloSpec) -> LevelResult:
    """Attach the checks and the level status to ``level`` (returned for chaining)."""
    checks = [latency_check(level, c) for c in slo.checks] + rate_checks(level, slo)
    level.checks = checks
    level.status = level_status(level.requests, checks)
    return level


def check_key(check: Check) -> str:
    """A check's name as run.json's ``decision.check`` gives it: ``long.tpot_ms.p95`` for a class's check."""
    return f"{check.class_name}.{check.name}" if check.class_name else check.name


#: run.json ``decision.ended`` values of a level that a look decided.
DECIDED_AT_LOOK = ("decided", "decided_early", "decided_after_extension")


def honour_decision(level: LevelResult) -> LevelResult:
    """A level that a look decided keeps that verdict where the full analysis is merely uncertain.

    The run acted on the look: a ``fail`` ended the sweep, a ``pass`` let it
    climb. The look judged the data of that instant at the corrected
    confidence, with the requests then in flight censored; the final analysis
    also sees those requests finish, so near the limit its interval can come
    out straddling where the look's did not. Reporting "uncertain" then would
    contradict the decision the run took (the sweep stopped at a level the
    report cannot call failing), so the uncertain checks take the look's
    verdict and say so in their reason. A certain verdict of the final
    analysis is never overridden. With request classes the same holds for
    every class's checks (a failing look names its check with its class,
    ``long.tpot_ms.p95``) and each class's own status follows. Call this
    only when the analysis judges with the SLOs the run itself was judged with.
    """
    decision = level.decision or {}
    verdict = decision.get("verdict")
    if decision.get("ended") not in DECIDED_AT_LOOK or verdict not in ("pass", "fail") or level.status != "uncertain":
        return level
    decided = decision.get("check")
    if verdict == "fail" and not any(check_key(c) == decided and c.verdict == "uncertain" for c in level.checks):
        return level  # the deciding check is unknown (an older run) or no longer uncertain
    looks = decision.get("looks_taken") or []
    at = f" at {looks[-1]['at_s']:g} s" if looks and isinstance(looks[-1], dict) and "at_s" in looks[-1] else ""
    for check in level.checks:
        if check.verdict == "uncertain" and (verdict == "pass" or check_key(check) == decided):
            check.verdict = verdict
            check.reason = f"decided by the look{at}; with every request in, the interval straddles the limit"
    level.status = level_status(level.requests, level.checks)
    for class_level in level.classes.values():
        # a class's checks are the same objects as the level's: its own status follows them
        if class_level.requests or any(c.verdict == "fail" for c in class_level.checks):
            class_level.status = level_status(max(1, class_level.requests), class_level.checks)
    return level


def level_status(requests: int, checks: list[Check]) -> LevelStatus:
    if requests == 0:
        return "no_data"
    verdicts = {c.verdict for c in checks}
    if "fail" in verdicts:
        return "fail"
    if verdicts & {"uncertain", "no_data"}:
        return "uncertain"
    return "pass"
