"""Service-level objectives: what a level must achieve to count as "holding" the load.

One type, :class:`SloSpec`, for every place an SLO comes from: the scenario's
``slo:`` block (and each request class's), the ``--slo`` overrides, the copy in
run.json and summary.json. It is a pydantic model, so the scenario validates
it like any other section, and the analysis builds it from a stored mapping
with :meth:`SloSpec.from_dict`. The metrics an SLO may name, their labels and
the percentiles are the metric registry's (:mod:`loadtest.metric_registry`),
so the YAML schema and the ``--slo`` parser accept the same metrics: every
latency metric the analysis measures with percentiles, TTFB included.

A bad value is one clear line naming its path (``slo.itl_ms.p97: unknown
percentile 'p97'; ...``): :class:`SloError` carries the path below ``slo``, the
scenario's error formatter and :meth:`SloSpec.from_dict` prefix it.

The YAML shape is kept as the serialized shape too (:meth:`SloSpec.to_dict`), so
``summary.json`` shows the SLOs exactly as the user wrote them::

    slo:
      ttft_ms: {p95: 500}
      itl_ms: {p95: 50}
      max_error_rate: 0.01
      min_valid_output_rate: 0.99   # with workload.tools / response_format

The last is a floor, not a ceiling: the share of answers whose tool-call JSON
or schema output validates (``levels[].valid_output_rate``) must stay at or
above it, so a server that gets faster by emitting broken JSON fails the level
instead of looking better.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer, model_validator

from loadtest.errors import InputError
from loadtest.metric_registry import ERROR_BUDGET, LABELS, PERCENTILES, SLO_METRICS, VALID_OUTPUT_MINIMUM

#: Latency metrics an SLO may constrain (all in milliseconds): the registry's ``slo=True`` ones.
METRICS: tuple[str, ...] = SLO_METRICS

ERROR_RATE = ERROR_BUDGET
VALID_OUTPUT = VALID_OUTPUT_MINIMUM
#: The SLO keys that are rates (a fraction between 0 and 1), not latency metrics.
RATE_KEYS = (ERROR_RATE, VALID_OUTPUT)

#: Human names for messages ("the p95 ITL is 130 ms").
METRIC_LABELS: dict[str, str] = LABELS

#: The error budget of a scenario that names none (a stored SLO without one has none).
DEFAULT_MAX_ERROR_RATE = 0.01


class SloError(ValueError):
    """A bad SLO value: ``path`` below ``slo`` (``"itl_ms.p97"``) and what is wrong with it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


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


class SloSpec(BaseModel):
    """All objectives of a run: latency checks plus an error budget (``None`` = no budget).

    Validated from the YAML shape (``{itl_ms: {p95: 50}, max_error_rate: 0.01}``);
    the checks keep the order they were written in (later keys win). In a
    scenario a missing ``max_error_rate`` is the default budget; in a stored
    mapping read by :meth:`from_dict` it means none (``--slo max_error_rate=off``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    checks: tuple[SloCheck, ...] = ()
    max_error_rate: float | None = DEFAULT_MAX_ERROR_RATE
    #: The least share of valid structured outputs per level (None: not judged; see the module doc).
    min_valid_output_rate: float | None = None

    # -- construction -----------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _from_yaml_shape(cls, data: Any) -> Any:
        """The YAML mapping → ``checks`` and ``max_error_rate`` (only what it names, for ``model_fields_set``)."""
        if isinstance(data, SloSpec) or (isinstance(data, Mapping) and "checks" in data):
            return data
        if data is None:
            return {}
        if not isinstance(data, Mapping):
            raise SloError("", f"expected a mapping, got {type(data).__name__}")
        checks: list[SloCheck] = []
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key in RATE_KEYS:
                out[str(key)] = None if value is None else _error_rate(value, where=str(key))
                continue
            if key not in METRICS:
                raise SloError(
                    str(key), f"unknown SLO metric; expected one of {', '.join(METRICS)}, {ERROR_RATE} or {VALID_OUTPUT}"
                )
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise SloError(str(key), f"expected a mapping like {{p95: 500}}, got {value!r}")
            for pct, limit in value.items():
                if limit is None:
                    continue
                where = f"{key}.{pct}"
                checks.append(SloCheck(str(key), _percentile(str(pct), where=where), _limit(limit, where=where)))
        out["checks"] = tuple(_dedupe(checks))
        return out

    @model_serializer(mode="plain")
    def _to_yaml_shape(self) -> dict[str, Any]:
        """The scenario's full form: every SLO metric (``{}`` when unconstrained), then the budget."""
        out: dict[str, Any] = {m: {} for m in METRICS}
        for check in self.checks:
            out[check.metric][check.percentile] = check.limit
        out[ERROR_RATE] = self.max_error_rate
        if self.min_valid_output_rate is not None:  # only when set: older readers know no such key
            out[VALID_OUTPUT] = self.min_valid_output_rate
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "SloSpec":
        """Build from a stored ``slo`` mapping; ``None``/empty means no objectives (and no budget).

        Null values are skipped (a resolved model emits every field). A bad value
        is an :class:`InputError` naming its path (``slo.itl_ms.p97: ...``).
        """
        if data is None:
            return cls(max_error_rate=None)
        if isinstance(data, Mapping) and ERROR_RATE not in data:
            data = {**data, ERROR_RATE: None}
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            first = err.errors(include_url=False)[0]
            cause = (first.get("ctx") or {}).get("error")
            if isinstance(cause, SloError):
                raise InputError(f"slo{'.' + cause.path if cause.path else ''}: {cause.message}") from None
            where = ".".join(str(part) for part in first["loc"])
            raise InputError(f"slo{'.' + where if where else ''}: {first['msg']}") from None

    def with_overrides(self, overrides: Iterable[str], *, class_name: str | None = None) -> "SloSpec":
        """Apply CLI overrides such as ``"itl_ms.p95=40"`` or ``"max_error_rate=0.05"``.

        ``"itl_ms.p95=off"`` (or ``none``) removes a check. Any malformed override
        raises :class:`InputError` naming the override and what was expected.
        With ``class_name``, the overrides are that class's as the user typed them
        (``chat.e2e_ms.p95=abc``): the prefix is dropped to apply one, and kept in
        the message, which quotes the override as given, not a part of it.
        """
        spec = self
        for raw in overrides:
            text = raw.strip()
            if class_name is not None:
                text = text.removeprefix(f"{class_name}.")
            try:
                spec = spec._apply_override(text, said=raw)
            except SloError as err:
                raise InputError(f"--slo {raw!r}: {err.message}") from None
        return spec

    def _apply_override(self, text: str, *, said: str) -> "SloSpec":
        """``text`` applied (``metric.pct=limit`` or ``rate_key=rate``); ``said``, as the user gave it, in errors."""
        if "=" not in text:
            raise InputError(
                f"bad --slo override {said!r}: expected METRIC.PERCENTILE=LIMIT (e.g. itl_ms.p95=40) "
                f"or {ERROR_RATE}=RATE or {VALID_OUTPUT}=RATE"
            )
        key, _, value = (part.strip() for part in text.partition("="))
        remove = value.lower() in ("off", "none", "null")
        if key in RATE_KEYS:
            rate = None if remove else _error_rate(value, where=key)
            return self.model_copy(update={key: rate})
        metric, dot, pct = key.partition(".")
        if not dot:
            raise InputError(
                f"bad --slo override {said!r}: expected METRIC.PERCENTILE=LIMIT (e.g. itl_ms.p95=40)"
            )
        if metric not in METRICS:
            raise InputError(
                f"bad --slo override {said!r}: unknown metric {metric!r}; expected one of {', '.join(METRICS)}"
            )
        pct_name = _percentile(pct, where=key)
        kept = tuple(c for c in self.checks if not (c.metric == metric and c.percentile == pct_name))
        if remove:
            return self.model_copy(update={"checks": kept})
        limit = _limit(value, where=key)
        return self.model_copy(update={"checks": kept + (SloCheck(metric, pct_name, limit),)})

    # -- queries ----------------------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        return not self.checks and self.max_error_rate is None and self.min_valid_output_rate is None

    def tightest(self, *metrics: str) -> float | None:
        """The smallest limit over all percentiles of ``metrics`` (``None`` when unconstrained).

        Goodput judges single requests, which have no percentiles: a request is
        "good" when it meets the tightest limit that applies to its metric.
        """
        limits = [c.limit for c in self.checks if c.metric in metrics]
        return min(limits) if limits else None

    def to_dict(self) -> dict[str, Any]:
        """The compact YAML shape, e.g. ``{"itl_ms": {"p95": 50.0}, "max_error_rate": 0.01}``."""
        out: dict[str, Any] = {}
        for check in self.checks:
            out.setdefault(check.metric, {})[check.percentile] = check.limit
        if self.max_error_rate is not None:
            out[ERROR_RATE] = self.max_error_rate
        if self.min_valid_output_rate is not None:
            out[VALID_OUTPUT] = self.min_valid_output_rate
        return out

    def __eq__(self, other: object) -> bool:
        """Equal objectives, however the two were built (which fields were set does not count)."""
        if not isinstance(other, SloSpec):
            return NotImplemented
        return (self.checks, self.max_error_rate, self.min_valid_output_rate) == (
            other.checks, other.max_error_rate, other.min_valid_output_rate
        )

    def __hash__(self) -> int:
        return hash((self.checks, self.max_error_rate, self.min_valid_output_rate))


# -- validation helpers -------------------------------------------------------------------


def _percentile(text: str, *, where: str) -> str:
    name = text.strip().lower()
    if name not in PERCENTILES:
        raise SloError(where, f"unknown percentile {text!r}; expected one of {', '.join(PERCENTILES)}")
    return name


def _number(value: Any, *, where: str) -> float:
    if isinstance(value, bool):
        raise SloError(where, f"expected a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SloError(where, f"expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise SloError(where, f"expected a finite number, got {value!r}")
    return number


def _limit(value: Any, *, where: str) -> float:
    number = _number(value, where=where)
    if number <= 0:
        raise SloError(where, f"a latency limit must be > 0 ms, got {value!r}")
    return number


def _error_rate(value: Any, *, where: str) -> float:
    number = _number(value, where=where)
    if not 0.0 <= number <= 1.0:
        what = "a valid-output rate" if where.endswith(VALID_OUTPUT) else "an error rate"
        raise SloError(where, f"{what} is a fraction between 0 and 1, got {value!r}")
    return number


def _dedupe(checks: list[SloCheck]) -> list[SloCheck]:
    """Keep the last definition of each check name (later keys win, as in YAML merges)."""
    by_name: dict[str, SloCheck] = {}
    for check in checks:
        by_name.pop(check.name, None)
        by_name[check.name] = check
    return list(by_name.values())
