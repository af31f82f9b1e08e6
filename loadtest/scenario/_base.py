"""The base of every scenario model, and the numbers a scenario may hold.

Strict (unknown keys are typos) and frozen. The numeric types are strict too:
YAML's ``true`` is not the integer 1, ``8.5`` is not a count of tokens, and
``.inf`` or ``.nan`` is not a duration, though pydantic's lax mode would take
each of them. Every model field that holds a number uses one of the types
below, so a scenario that says ``max_tokens: true`` is refused with its path
instead of running with one token.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

#: A count: an integer, not a bool or a float.
Int = Annotated[int, Strict()]
PositiveInt = Annotated[int, Strict(), Field(gt=0)]
NonNegativeInt = Annotated[int, Strict(), Field(ge=0)]
#: A finite number (an integer is one too), not a bool.
PositiveFloat = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]


class _Strict(BaseModel):
    """Unknown keys are mistakes (usually typos), so they are rejected; so is an infinite number."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
