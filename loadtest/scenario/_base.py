"""The base of every scenario model: strict (unknown keys are typos) and frozen."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    """Unknown keys are mistakes (usually typos), so they are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)
