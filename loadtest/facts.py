"""The scenario's optional facts about the serving stack: ``hardware:``, ``model:`` and ``cost:``.

Why a module of its own: these only feed analysis (the roofline floors and the
cost arithmetic), never the load, and ``scenario.py`` should not grow. Each is
a small strict model; the scenario holds them as optional fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator, model_validator

from loadtest.accelerators import find_accelerator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hardware(_Strict):
    """What one replica runs on: a known accelerator (loadtest/accelerators.py) or explicit ceilings."""

    accelerator: str | None = None
    #: Accelerators per replica (tensor parallel): bandwidth and FLOPS add up.
    count: PositiveInt = 1
    #: Per accelerator; override the table, or stand alone for a chip it does not list.
    hbm_gbps: PositiveFloat | None = None
    tflops: PositiveFloat | None = None
    #: Which tensor throughput the served precision uses.
    precision: Literal["fp16", "bf16", "fp8"] = "fp16"

    @field_validator("accelerator")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                find_accelerator(v)
            except Exception as err:  # InputError: its message names the known ones
                raise ValueError(str(err).split(": ", 1)[-1]) from None
        return v

    @model_validator(mode="after")
    def _enough(self) -> "Hardware":
        if self.accelerator is None and (self.hbm_gbps is None or self.tflops is None):
            raise ValueError("give 'accelerator' (see the README's table) or both 'hbm_gbps' and 'tflops'")
        return self


class ModelFacts(_Strict):
    """The served model's size, for the floors; whatever is left out is read from the server where it says."""

    #: Parameters, in billions.
    params_b: PositiveFloat | None = None
    #: Bytes per weight of the served precision (2 for FP16/BF16, 1 for FP8/INT8, ~0.56 for Q4_K).
    bytes_per_weight: PositiveFloat | None = None
    #: KV-cache bytes per context token; or give layers, kv_heads and head_dim.
    kv_bytes_per_token: PositiveFloat | None = None
    layers: PositiveInt | None = None
    kv_heads: PositiveInt | None = None
    head_dim: PositiveInt | None = None
    #: Bytes per cached K or V value (2 for FP16 caches, 1 for FP8).
    kv_bytes_per_value: PositiveFloat = 2.0
    #: A Hugging Face config.json: layers, KV heads and head dim are read from it.
    config_json: str | None = None

    @field_validator("config_json")
    @classmethod
    def _readable(cls, v: str | None) -> str | None:
        if v is not None and not Path(v).is_file():
            raise ValueError(f"no such file: {v}")
        return v

    def kv_per_token(self) -> float | None:
        """KV bytes per token: given, or 2 (K and V) × layers × KV heads × head dim × bytes per value."""
        if self.kv_bytes_per_token is not None:
            return self.kv_bytes_per_token
        layers, heads, dim = self.layers, self.kv_heads, self.head_dim
        if self.config_json is not None:
            cfg = json.loads(Path(self.config_json).read_text())
            layers = layers or cfg.get("num_hidden_layers")
            heads = heads or cfg.get("num_key_value_heads") or cfg.get("num_attention_heads")
            if not dim and cfg.get("hidden_size") and cfg.get("num_attention_heads"):
                dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        if layers and heads and dim:
            return 2.0 * layers * heads * dim * self.kv_bytes_per_value
        return None


class Cost(_Strict):
    """The price of one replica, and the shape of a day's traffic for the forecast."""

    #: Per replica per hour.
    usd_per_hour: PositiveFloat | None = None
    #: Per accelerator per hour (× hardware.count per replica).
    usd_per_accelerator_hour: PositiveFloat | None = None
    #: 24 hourly fractions of the peak (1.0 = the peak hour); default: every hour at the peak.
    daily_shape: list[float] | None = Field(default=None, min_length=24, max_length=24)

    @field_validator("daily_shape")
    @classmethod
    def _fractions(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and any(not (0.0 <= x <= 1.0) for x in v):
            raise ValueError("each hour's fraction of the peak must be between 0 and 1")
        return v

    @model_validator(mode="after")
    def _one_price(self) -> "Cost":
        if self.usd_per_hour is not None and self.usd_per_accelerator_hour is not None:
            raise ValueError("give either 'usd_per_hour' (per replica) or 'usd_per_accelerator_hour', not both")
        return self
