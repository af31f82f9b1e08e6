"""Dollars: per million tokens at capacity, and a month's bill for a traffic forecast.

Why on goodput: a server that is fast but misses its SLO is not cheap, because
the requests it serves too slowly are worth nothing to their users. So the
price of an hour is divided by what was served *within the SLO* in that hour
at the capacity level (only requests that met every per-request limit), not by
raw throughput; the throughput-based figure is kept beside it for contrast.

The forecast: ``--peak-users N`` (closed loop: capacity is users per replica)
or ``--peak-rps R`` (goodput requests/s per replica at capacity), a daily shape
of 24 hourly fractions of the peak, and the autoscaling headroom (replicas are
sized so each runs at ``capacity × (1 − headroom)``). An autoscaled fleet pays
for each hour's replicas; a static fleet pays for the peak's all day. A month
is 365.25 / 12 days. Pure arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

DAYS_PER_MONTH = 365.25 / 12


@dataclass(frozen=True)
class Served:
    """What one replica served per second at the capacity level."""

    goodput_rps: float
    #: Output / prompt tokens per second of the requests that met the SLO.
    good_output_tokens_per_s: float
    good_prompt_tokens_per_s: float
    #: All successful requests, for contrast.
    requests_per_s: float = math.nan
    output_tokens_per_s: float = math.nan


@dataclass
class UnitCost:
    usd_per_hour: float
    usd_per_million_output_tokens: float | None
    usd_per_million_tokens: float | None
    usd_per_thousand_requests: float | None
    #: The same price over all successful output tokens (ignores the SLO): never higher.
    usd_per_million_output_tokens_throughput: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _per(usd_per_hour: float, units_per_s: float, scale: float) -> float | None:
    if not (units_per_s > 0 and math.isfinite(units_per_s)):
        return None
    return usd_per_hour / (units_per_s * 3600.0) * scale


def unit_cost(usd_per_hour: float, served: Served) -> UnitCost:
    """Price per million output tokens, per million tokens (prompt + output) and per thousand requests."""
    return UnitCost(
        usd_per_hour=usd_per_hour,
        usd_per_million_output_tokens=_per(usd_per_hour, served.good_output_tokens_per_s, 1e6),
        usd_per_million_tokens=_per(
            usd_per_hour, served.good_output_tokens_per_s + served.good_prompt_tokens_per_s, 1e6
        ),
        usd_per_thousand_requests=_per(usd_per_hour, served.goodput_rps, 1e3),
        usd_per_million_output_tokens_throughput=_per(usd_per_hour, served.output_tokens_per_s, 1e6),
    )


@dataclass
class Forecast:
    #: "users" or "rps": what the peak counts.
    unit: str
    peak: float
    #: What one replica is run at: capacity × (1 − headroom).
    per_replica: float
    headroom: float
    replicas_by_hour: list[int] = field(default_factory=list)
    peak_replicas: int = 0
    monthly_usd_autoscaled: float = 0.0
    monthly_usd_static: float = 0.0
    daily_shape: list[float] = field(default_factory=lambda: [1.0] * 24)

    @property
    def saving(self) -> float:
        """Share of the static fleet's bill that autoscaling saves."""
        if self.monthly_usd_static <= 0:
            return 0.0
        return 1.0 - self.monthly_usd_autoscaled / self.monthly_usd_static

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "peak": self.peak,
            "per_replica": self.per_replica,
            "headroom": self.headroom,
            "replicas_by_hour": list(self.replicas_by_hour),
            "peak_replicas": self.peak_replicas,
            "monthly_usd_autoscaled": self.monthly_usd_autoscaled,
            "monthly_usd_static": self.monthly_usd_static,
            "autoscaling_saving": self.saving,
            "daily_shape": list(self.daily_shape),
        }


def replicas_for(load: float, capacity: float, headroom: float) -> int:
    """Replicas so that each carries at most ``capacity × (1 − headroom)``; 0 for no load."""
    if load <= 0:
        return 0
    per = capacity * (1.0 - headroom)
    if per <= 0:
        raise ValueError("capacity × (1 − headroom) must be positive")
    # A hair of tolerance so that 36 users at 9 per replica is 4, not 5, after float rounding.
    return max(1, math.ceil(load / per - 1e-9))


def forecast(
    usd_per_hour: float,
    capacity: float,
    peak: float,
    *,
    unit: str = "users",
    headroom: float = 0.0,
    daily_shape: Sequence[float] | None = None,
) -> Forecast:
    """Replicas per hour (``daily_shape`` × peak, autoscaled) and the monthly bill, against a static peak fleet."""
    shape = list(daily_shape) if daily_shape is not None else [1.0] * 24
    if len(shape) != 24:
        raise ValueError("daily_shape needs 24 hourly fractions")
    hours = [replicas_for(peak * f, capacity, headroom) for f in shape]
    top = replicas_for(peak, capacity, headroom)
    return Forecast(
        unit=unit,
        peak=peak,
        per_replica=capacity * (1.0 - headroom),
        headroom=headroom,
        replicas_by_hour=hours,
        peak_replicas=top,
        monthly_usd_autoscaled=sum(hours) * usd_per_hour * DAYS_PER_MONTH,
        monthly_usd_static=top * 24 * usd_per_hour * DAYS_PER_MONTH,
        daily_shape=shape,
    )


def change(before: float | None, after: float | None) -> float | None:
    """Relative change ``after / before − 1`` (None when either is missing or before is 0)."""
    if before is None or after is None or before == 0:
        return None
    return after / before - 1.0
