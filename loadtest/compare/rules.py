"""The gate's rules from the command line: tolerances and what fails the gate.

``--tolerance 5%`` sets the global tolerance; ``--tolerance itl_ms.p95=3%``
sets one check's, ``--tolerance itl_ms=3%`` every percentile of a metric.
Latency and throughput tolerances are *relative* (5% = the candidate may be
5% worse); the error rate's is *absolute*, in percentage points
(``error_rate=0.5%`` allows the failed share to grow by half a point), since
a relative change of a rate that is usually 0 means nothing. The share of
valid structured outputs (``valid_output_rate``, with tools or a
response_format) is absolute too, and worse when it *drops*:
``valid_output_rate=0.5%`` allows half a point fewer valid answers.

Throughput is output tokens/s (``throughput`` or ``output_tokens_per_s``); at a rate level (open
loop, trace replay) it is the share of the sends the server completed, ``completed_share``
(``throughput`` names it too), since there the tokens/s follow the client's schedule.

``--fail-on`` lists what fails the gate: ``capacity``, ``latency`` (every SLO
percentile), ``throughput``, ``error_rate``, a check name such as
``itl_ms.p95``, ``valid_output_rate``, ``all`` (the default) or ``none``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

from loadtest.analysis.slo import METRICS, PERCENTILES
from loadtest.errors import InputError

DEFAULT_TOLERANCE = 0.05
DEFAULT_ERROR_RATE_TOLERANCE = 0.01
#: A drop of one percentage point of valid structured outputs is within tolerance.
DEFAULT_VALID_OUTPUT_TOLERANCE = 0.01
THROUGHPUT = "output_tokens_per_s"
#: The throughput check of a rate level (open loop, trace replay): ``open_loop.completed_rps`` over
#: ``open_loop.sent_rps``, the share of the sends the server completed (see summary_values.completed_share).
COMPLETED_SHARE = "completed_share"
ERROR_RATE = "error_rate"
VALID_OUTPUT = "valid_output_rate"
#: The checks whose change is absolute (percentage points), not relative.
ABSOLUTE = (ERROR_RATE, VALID_OUTPUT)
CAPACITY = "capacity"
GROUPS = ("capacity", "latency", "throughput", "error_rate", VALID_OUTPUT)
_THROUGHPUT_ALIASES = {"throughput", THROUGHPUT}


def split_class(check: str) -> tuple[str | None, str]:
    """``"chat.itl_ms.p95"`` → ``("chat", "itl_ms.p95")``; a check of the whole level → ``(None, check)``.

    A request class's SLO check is named as its verdicts are (``long.tpot_ms.p95``): the class, then
    the metric and percentile. Read from the right, so a class name may hold a dot."""
    parts = check.rsplit(".", 2)
    if len(parts) == 3 and parts[1] in METRICS and parts[2] in PERCENTILES:
        return parts[0], f"{parts[1]}.{parts[2]}"
    return None, check


def check_kind(check: str) -> str:
    """``latency`` (a percentile), ``throughput``, or the absolute share itself (``error_rate``, ``valid_output_rate``)."""
    if check in (THROUGHPUT, COMPLETED_SHARE):
        return "throughput"
    return check if check in ABSOLUTE else "latency"


@dataclass(frozen=True)
class Rules:
    """Tolerances per check and the checks that fail the gate."""

    tolerance: float = DEFAULT_TOLERANCE
    error_rate_tolerance: float = DEFAULT_ERROR_RATE_TOLERANCE
    per_check: dict[str, float] = field(default_factory=dict)  # "itl_ms.p95" / "itl_ms" / THROUGHPUT
    fail_on: frozenset[str] = frozenset({"all"})
    inconclusive: str = "exit_6"  # "exit_6", "pass" (exit 0) or "fail" (exit 1)

    def tolerance_for(self, check: str) -> float:
        if check == ERROR_RATE:
            return self.per_check.get(ERROR_RATE, self.error_rate_tolerance)
        if check == VALID_OUTPUT:
            return self.per_check.get(VALID_OUTPUT, DEFAULT_VALID_OUTPUT_TOLERANCE)
        if check in self.per_check:
            return self.per_check[check]
        if check == COMPLETED_SHARE:  # a rate level's throughput: --tolerance throughput=… names it too
            return self.per_check.get(THROUGHPUT, self.tolerance)
        plain = split_class(check)[1]  # a class's check takes the metric's tolerance unless named itself
        if plain in self.per_check:
            return self.per_check[plain]
        metric = plain.partition(".")[0]
        return self.per_check.get(metric, self.tolerance)

    def gates(self, check: str, kind: str) -> bool:
        """Does a regression of ``check`` (of kind latency/throughput/error_rate/capacity) fail the gate?"""
        if "none" in self.fail_on:
            return False
        plain = split_class(check)[1]  # --fail-on itl_ms.p95 gates each class's ITL p95 too
        return bool({"all", kind, check, plain, plain.partition(".")[0]} & self.fail_on)

    def unmatched(self, checks: Iterable[str]) -> list[str]:
        """The checks and metrics ``--fail-on`` names that none of ``checks`` is: they could never fail
        the gate. (A trial's ``--fail-on itl_ms.p95`` passed, exit 0, on a scenario whose SLOs were
        per request class: the comparison had no ITL check at all.)"""
        have = {c for check in checks for plain in (split_class(check)[1],)
                for c in (check, plain, plain.partition(".")[0])}
        named = self.fail_on - {"all", "none", *GROUPS}
        return sorted(n for n in named if n not in have)


def unmatched_class_tolerances(rules: Rules, checks: Iterable[str]) -> list[str]:
    """The request-class checks ``--tolerance`` names (``chta.itl_ms.p95=3%``) that none of ``checks`` is: a
    mistyped class would otherwise leave its check at the default tolerance without a word."""
    have = set(checks)
    return sorted(k for k in rules.per_check if split_class(k)[0] is not None and k not in have)


def parse_rules(
    tolerances: Iterable[str] = (), fail_on: Iterable[str] = (), inconclusive: str | None = None
) -> Rules:
    """Build :class:`Rules` from the flags; a bad value is one :class:`InputError` line."""
    glob = DEFAULT_TOLERANCE
    per: dict[str, float] = {}
    for raw in tolerances:
        if not raw.replace(",", " ").strip():
            raise InputError(f"--tolerance {raw!r}: expected a tolerance such as 5% or itl_ms.p95=3%")
        for item in _items(raw, "--tolerance", "5%,itl_ms.p95=3%"):
            key, eq, value = item.partition("=")
            if not eq:
                glob = _fraction(key, where=f"--tolerance {item!r}")
                continue
            name = _check_name(key.strip(), where=f"--tolerance {item!r}")
            per[name] = _fraction(value, where=f"--tolerance {item!r}")
    groups: set[str] = set()
    for raw in fail_on:
        if not raw.replace(",", " ").strip():  # --fail-on "" (an unset CI variable): not "all" by accident
            raise InputError(f"--fail-on {raw!r}: name what fails the gate: {', '.join(sorted(GROUPS))}, "
                             "a check such as itl_ms.p95, all or none")
        for item in _items(raw, "--fail-on", "capacity,latency"):
            name = item.strip()
            if name in GROUPS or name in ("all", "none"):
                groups.add(name)
            else:
                groups.add(_check_name(name, where=f"--fail-on {item!r}",
                                       also=f"a group ({', '.join(GROUPS)}), all or none"))
    if inconclusive not in (None, "pass", "fail"):
        raise InputError(f"--inconclusive {inconclusive!r}: expected pass or fail")
    return Rules(
        tolerance=glob,
        per_check=per,
        fail_on=frozenset(groups or {"all"}),
        inconclusive=inconclusive or "exit_6",
    )


def _items(raw: str, flag: str, example: str) -> list[str]:
    """One value of a list flag, split at its commas and spaces; an empty item is refused, naming the flag.

    ``--fail-on capacity,`` or ``--fail-on "capacity,$EXTRA"`` with the variable unset is a typo or
    a list cut short: dropping the empty item silently would gate on less than was meant, and say
    nothing (as ``--levels 1,,2`` is refused, see cli_common.py)."""
    parts = raw.split(",")
    if any(not part.strip() for part in parts):
        raise InputError(f"{flag} {raw!r}: an empty item in the comma-separated list; expected e.g. {flag} {example}")
    return [item for part in parts for item in part.split()]


def _check_name(key: str, *, where: str, also: str = "") -> str:
    """A check's name as the gate knows it; ``also`` names what else the flag accepts (--fail-on's groups)."""
    if key in _THROUGHPUT_ALIASES:
        return THROUGHPUT
    if key in ABSOLUTE or key == COMPLETED_SHARE:
        return key
    metric, dot, pct = key.partition(".")
    if metric in METRICS and (not dot or pct in PERCENTILES):
        return key
    if split_class(key)[0]:  # a request class's check, CLASS.METRIC.PERCENTILE (the class is checked later)
        return key
    raise InputError(
        f"{where}: unknown check {key!r}; expected METRIC, METRIC.PERCENTILE or CLASS.METRIC.PERCENTILE "
        f"(metrics {', '.join(METRICS)}; "
        f"percentiles {', '.join(PERCENTILES)}), throughput, {COMPLETED_SHARE}, error_rate or {VALID_OUTPUT}"
        + (f"; or {also}" if also else "")
    )


def _fraction(text: str, *, where: str) -> float:
    """``5%`` → 0.05; ``0.05`` → 0.05."""
    raw = text.strip()
    percent = raw.endswith("%")
    try:
        value = float(raw[:-1] if percent else raw)
    except ValueError:
        raise InputError(f"{where}: expected a tolerance like 5% or 0.05, got {text!r}") from None
    value = value / 100.0 if percent else value
    if not math.isfinite(value):
        raise InputError(f"{where}: expected a tolerance like 5% or 0.05, got {text!r}")
    if value < 0:  # the band is ± the tolerance (docs/gate.md): a negative one has no inside, so no meaning
        raise InputError(f"{where}: a tolerance is how far a check may move either way and still be unchanged, "
                         f"so 0 or more (e.g. 5% or 0.05), got {text!r}")
    return value
