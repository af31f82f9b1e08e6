"""``slo:``: latency limits by percentile, plus the error budget."""

from __future__ import annotations

from pydantic import Field, PositiveFloat, field_validator

from loadtest.scenario._base import _Strict


PERCENTILES = ("p50", "p90", "p95", "p99")
LATENCY_METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")

class Slo(_Strict):
    """Latency limits by percentile, plus the error budget."""

    ttft_ms: dict[str, PositiveFloat] = Field(default_factory=dict)
    itl_ms: dict[str, PositiveFloat] = Field(default_factory=dict)
    tpot_ms: dict[str, PositiveFloat] = Field(default_factory=dict)
    e2e_ms: dict[str, PositiveFloat] = Field(default_factory=dict)
    max_error_rate: float = Field(default=0.01, ge=0.0, le=1.0)

    @field_validator("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
    @classmethod
    def _known_percentiles(cls, v: dict[str, float]) -> dict[str, float]:
        for key in v:
            if key not in PERCENTILES:
                raise ValueError(f"unknown percentile '{key}' (use one of {', '.join(PERCENTILES)})")
        return v
