"""Service-level objectives: what a level must achieve to count as "holding" the load.

The SLO block comes from the scenario YAML and can be overridden from the CLI
(``--slo itl_ms.p95=40``). Both paths end in one immutable :class:`SloSpec`, so
the analyzer never has to know where a limit came from, and a bad value is
reported as one clear :class:`~loadtest.errors.InputError` line, never a
traceback.

The YAML shape is kept as the serialized shape too (:meth:`SloSpec.to_dict`), so
``summary.json`` shows the SLOs exactly as the user wrote them::

    slo:
      ttft_ms: {p95: 500}
      itl_ms: {p95: 50}
      max_error_rate: 0.01
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from loadtest.errors import InputError

#: Latency metrics an SLO may constrain (all in milliseconds).
METRICS: tuple[str, ...] = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "ttfb_ms")

#: Percentiles an SLO may use, and the quantile each one means.
PERCENTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}

ERROR_RATE = "max_error_rate"

#: Human names for messages ("the p95 ITL is 130 ms").
METRIC_LABELS: dict[str, str] = {
    "ttft_ms": "TTFT",
    "itl_ms": "ITL",
    "tpot_ms": "TPOT",
    "e2e_ms": "end-to-end latency",
    "ttfb_ms": "TTFB",
}


@dataclass(frozen=True)
class SloCheck:
    """One latency objective: ``percentile`` of ``metric`` must be ≤ ``limit`` ms."""

    metric: str
    percentile: str
    limit: float

    @property
    def name(self) -> str:
        """The check's stable id, e.g. ``"itl_ms.p95"`` (used in summary.json and overrides)."""
        return f"{self.metric}.{self.percentile}"

    @property
    def q(self) -> float:
        return PERCENTILES[self.percentile]

    @property
    def label(self) -> str:
        """Prose form for messages, e.g. ``"p95 ITL"``."""
        return f"{self.percentile} {METRIC_LABELS[self.metric]}"


@dataclass(frozen=True)
class SloSpec:
    """All objectives of a run: latency checks plus an error budget (``None`` = no budget)."""

    checks: tuple[SloCheck, ...] = field(default_factory=tuple)
    max_error_rate: float | None = None

    # -- construction -----------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "SloSpec":
        """Build from the scenario's ``slo`` block; ``None``/empty means no objectives.

        Null values are skipped (a resolved pydantic model may emit every field).
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise InputError(f"slo: expected a mapping, got {type(data).__name__}")
        checks: list[SloCheck] = []
        max_error_rate: float | None = None
        for key, value in data.items():
            if value is None:
                continue
            if key == ERROR_RATE:
                max_error_rate = _error_rate(value, where=f"slo.{key}")
                continue
            if key not in METRICS:
                raise InputError(
                    f"slo.{key}: unknown SLO metric; expected one of {', '.join(METRICS)} or {ERROR_RATE}"
                )
            if not isinstance(value, Mapping):
                raise InputError(f"slo.{key}: expected a mapping like {{p95: 500}}, got {value!r}")
            for pct, limit in value.items():
                if limit is None:
                    continue
                pct_name = _percentile(str(pct), where=f"slo.{key}.{pct}")
                checks.append(SloCheck(key, pct_name, _limit(limit, where=f"slo.{key}.{pct}")))
        return cls(tuple(_dedupe(checks)), max_error_rate)

    def with_overrides(self, overrides: Iterable[str]) -> "SloSpec":
        """Apply CLI overrides such as ``"itl_ms.p95=40"`` or ``"max_error_rate=0.05"``.

        ``"itl_ms.p95=off"`` (or ``none``) removes a check. Any malformed override
        raises :class:`InputError` naming the override and what was expected.
        """
        spec = self
        for raw in overrides:
            spec = spec._apply_override(raw)
        return spec

    def _apply_override(self, raw: str) -> "SloSpec":
        text = raw.strip()
        if "=" not in text:
            raise InputError(
                f"bad --slo override {raw!r}: expected METRIC.PERCENTILE=LIMIT (e.g. itl_ms.p95=40) "
                f"or {ERROR_RATE}=RATE"
            )
        key, _, value = (part.strip() for part in text.partition("="))
        remove = value.lower() in ("off", "none", "null")
        if key == ERROR_RATE:
            rate = None if remove else _error_rate(value, where=f"--slo {raw!r}")
            return replace(self, max_error_rate=rate)
        metric, dot, pct = key.partition(".")
        if not dot:
            raise InputError(
                f"bad --slo override {raw!r}: expected METRIC.PERCENTILE=LIMIT (e.g. itl_ms.p95=40)"
            )
        if metric not in METRICS:
            raise InputError(
                f"bad --slo override {raw!r}: unknown metric {metric!r}; expected one of {', '.join(METRICS)}"
            )
        pct_name = _percentile(pct, where=f"--slo {raw!r}")
        kept = tuple(c for c in self.checks if not (c.metric == metric and c.percentile == pct_name))
        if remove:
            return replace(self, checks=kept)
        limit = _limit(value, where=f"--slo {raw!r}")
        return replace(self, checks=kept + (SloCheck(metric, pct_name, limit),))

    # -- queries ----------------------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        return not self.checks and self.max_error_rate is None

    def tightest(self, *metrics: str) -> float | None:
        """The smallest limit over all percentiles of ``metrics`` (``None`` when unconstrained).

        Goodput judges single requests, which have no percentiles: a request is
        "good" when it meets the tightest limit that applies to its metric.
        """
        limits = [c.limit for c in self.checks if c.metric in metrics]
        return min(limits) if limits else None

    def to_dict(self) -> dict[str, Any]:
        """The YAML shape, e.g. ``{"itl_ms": {"p95": 50.0}, "max_error_rate": 0.01}``."""
        out: dict[str, Any] = {}
        for check in self.checks:
            out.setdefault(check.metric, {})[check.percentile] = check.limit
        if self.max_error_rate is not None:
            out[ERROR_RATE] = self.max_error_rate
        return out


# -- validation helpers -------------------------------------------------------------------


def _percentile(text: str, *, where: str) -> str:
    name = text.strip().lower()
    if name not in PERCENTILES:
        raise InputError(f"{where}: unknown percentile {text!r}; expected one of {', '.join(PERCENTILES)}")
    return name


def _number(value: Any, *, where: str) -> float:
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise InputError(f"{where}: expected a finite number, got {value!r}")
    return number


def _limit(value: Any, *, where: str) -> float:
    number = _number(value, where=where)
    if number <= 0:
        raise InputError(f"{where}: a latency limit must be > 0 ms, got {value!r}")
    return number


def _error_rate(value: Any, *, where: str) -> float:
    number = _number(value, where=where)
    if not 0.0 <= number <= 1.0:
        raise InputError(f"{where}: an error rate is a fraction between 0 and 1, got {value!r}")
    return number


def _dedupe(checks: list[SloCheck]) -> list[SloCheck]:
    """Keep the last definition of each check name (later keys win, as in YAML merges)."""
    by_name: dict[str, SloCheck] = {}
    for check in checks:
        by_name.pop(check.name, None)
        by_name[check.name] = check
    return list(by_name.values())
