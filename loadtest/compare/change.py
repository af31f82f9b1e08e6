"""One check's change between two runs, its verdict, and its words.


A :class:`Change` is what every comparison produces (per level and check, and
the capacity); :func:`classify` turns the interval of its *badness* (worse is
positive) into the verdict, and :func:`describe_change` into the line every
output prints. Both the pair comparison (:mod:`engine`), the capacity check
(:mod:`capacity`) and the group comparison (:mod:`groups`) build on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from loadtest.analysis.capacity import confidence_pct
from loadtest.analysis.bootstrap import CONFIDENCE
from loadtest.compare.level_keys import USERS, LevelKey, load_text
from loadtest.compare.rules import ABSOLUTE, CAPACITY, COMPLETED_SHARE, ERROR_RATE, VALID_OUTPUT

Verdict = str  # "regression" | "improvement" | "unchanged" | "inconclusive"


@dataclass
class Change:
    """One check at one level (or the capacity): the candidate against the baseline."""

    check: str  # "itl_ms.p95", "output_tokens_per_s", "completed_share", "error_rate", "valid_output_rate" or "capacity"
    kind: str  # "latency" | "throughput" | "error_rate" | "valid_output_rate" | "capacity"
    level: LevelKey | None  # the level's key (level_keys): users, or a rate's req/s or speedup; None for capacity
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
    #: Worse than the reference runs' mean by more than the tolerance, yet within the run-to-run
    #: noise (see :attr:`within_noise_only`).
    beyond_tolerance_in_noise: bool = False
    #: Held because the run-to-run noise is unknown: why, in the message's words
    #: (noise.unknown_noise_reason); "" otherwise. The terminal says a shared reason once.
    unknown_noise: str = ""
    #: What ``level`` counts: ``users``, ``req/s`` (open loop) or ``×`` (trace replay), see :mod:`level_keys`.
    unit: str = USERS

    @property
    def name(self) -> str:
        """The JUnit test name: ``itl_ms.p95 @ 4 users`` (``@ 4 req/s``, ``@ 1.5×``) or ``capacity``."""
        return self.check if self.level is None else f"{self.check} @ {load_text(self.level, self.unit)}"

    @property
    def within_noise_only(self) -> bool:
        """Unchanged only because the run-to-run noise is wider than the change. Said apart from
        "within tolerance": a few reference runs give wide noise, and more narrow it."""
        return self.beyond_tolerance_in_noise and self.verdict == "unchanged"

    @property
    def fails_gate(self) -> bool:
        return self.gating and self.verdict == "regression"

    @property
    def holds_gate(self) -> bool:
        """Inconclusive in a way that could hide a regression the gate watches."""
        return self.gating and self.verdict == "inconclusive" and self.may_regress


#: The word the outputs print for a check that is ``unchanged`` only because the run-to-run noise is
#: wider than its change past the tolerance (:attr:`Change.within_noise_only`): "unchanged" beside
#: "+56.6%" claimed what 3 reference runs cannot tell. compare.json keeps ``verdict: unchanged`` (its
#: four values are a contract) with ``within_noise_only: true``.
WITHIN_NOISE = "within noise"


def shown_verdict(change: Change) -> str:
    """The verdict as the terminal, Markdown, JUnit and the page print it (:data:`WITHIN_NOISE`)."""
    return WITHIN_NOISE if change.within_noise_only else change.verdict


def untrusted_note(saturated: bool, contended: bool, quiet: str = "") -> str:
    """What a check's message adds when a level's numbers include the client's or the host's delay
    (``quiet``: else, why a quiet client's flag did not hold the check, :mod:`client_trust`)."""
    if saturated:
        return "; the load generator was saturated at this level, so a slowdown here may be the client's"
    if contended:
        return "; the host running the load generator was busy at this level, so a slowdown here may be the host's"
    return quiet


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


# -- words ----------------------------------------------------------------------------------


def _fmt_value(kind: str, value: float | None, check: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float) and math.isinf(value):
        return "∞ (failures)"
    if check == COMPLETED_SHARE:
        return f"{value * 100:.1f}%"  # of the sends: a share, judged as a relative change
    if kind == "latency":
        return f"{value:.1f} ms" if abs(value) < 1000 else f"{value:,.0f} ms"
    if kind == "throughput":
        return f"{value:,.1f} tok/s"
    if kind in ABSOLUTE:
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
    if change.kind in ABSOLUTE and change.baseline == change.candidate and lo == hi == 0.0 \
            and change.baseline in (0.0, 1.0):
        # both runs at the boundary (no failure, or every answer valid): resampled requests are all alike,
        # so the interval collapses to [+0.0, +0.0], which read as a certainty 24 requests cannot give
        none = "no request failed in either run" if change.kind == ERROR_RATE else \
            "every checked answer was valid in both runs"
        return f"{f(change.change)} ({none}, so no interval)"
    if no_interval(change):
        return f"{f(change.change)} (no interval)"
    return f"{f(change.change)} [{f(lo)}, {f(hi)}]"


def no_interval(change: Change) -> bool:
    """A level check whose change has no within-run interval at all (printed "[?, ?]" until 2026-12)."""
    lo, hi = change.ci
    return change.kind != CAPACITY and all(x is None or math.isnan(x) for x in (lo, hi))


def no_interval_words(change: Change) -> str:
    """Why a change has no within-run interval, said where "[?, ?]" stood.

    Throughput's interval is drawn from a run's records (each request's time and tokens, by Little's
    law: :mod:`delta`); summary.json keeps none. A run read from its summary alone (the runs past
    the first of each side with ``--also-*`` or ``--repeat``, a run whose records are gone) gives
    none, and neither does the change of a group it is in. A percentile's interval is in the summary,
    but open where a level had too few requests for it.
    """
    if change.kind == "throughput":  # tokens/s, or a rate level's completed share (its throughput)
        what = "the completed share" if change.check == COMPLETED_SHARE else "throughput"
        return f"no within-run interval: summary.json keeps none for {what}, and a run here is read from it"
    return "no within-run interval: a run's summary.json holds none for it (too few requests)"


def describe_change(change: Change, confidence: float = CONFIDENCE) -> str:
    """``itl_ms.p95 at 4 users: 90.0 ms → 102.1 ms, +13.4% [+12.9%, +14.0%] (tolerance 5%)`` (``at 4 req/s``)."""
    if change.kind == CAPACITY:
        return change.message
    tol = "" if change.tolerance is None else (
        f"tolerance {change.tolerance * 100:g}{'%' if change.relative else ' pp'}"
    )
    head = (f"{change.check} at {load_text(change.level, change.unit)}: "
            f"{_fmt_value(change.kind, change.baseline, change.check)} → {_fmt_value(change.kind, change.candidate, change.check)}")
    if no_interval(change):
        return f"{head}, {fmt_change(change).removesuffix(' (no interval)')} ({tol}; {no_interval_words(change)})"
    return f"{head}, {fmt_change(change)} at {confidence_pct(confidence)} ({tol})"


_ORDER = {"regression": 0, "inconclusive": 1, "improvement": 2, "unchanged": 3}


def worse_sign(kind: str) -> float:
    """+1 where a higher value is worse (latency, the error rate), -1 where a lower one is
    (throughput, the valid-output rate, capacity): a change times this is its badness."""
    return -1.0 if kind in ("throughput", VALID_OUTPUT, CAPACITY) else 1.0


def tolerances_worse(change: Change) -> float:
    """How many tolerances worse the change's point is (a failure's infinity the most; unknown the least)."""
    if change.change is None or math.isnan(change.change):
        return -math.inf
    return worse_sign(change.kind) * change.change / (change.tolerance or 1.0)


def severity(change: Change) -> tuple:
    held = 0 if change.holds_gate or change.fails_gate else 1
    return (_ORDER.get(change.verdict, 9), held, change.level is not None, change.level or 0, change.check)

