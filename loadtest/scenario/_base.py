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

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict

#: A count: an integer, not a bool or a float.
Int = Annotated[int, Strict()]
PositiveInt = Annotated[int, Strict(), Field(gt=0)]
NonNegativeInt = Annotated[int, Strict(), Field(ge=0)]
#: A finite number (an integer is one too), not a bool.
PositiveFloat = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]

#: The most users a level may hold (``load.levels``, ``start``/``max``, ``max_in_flight``, ``--levels``).
#: Each user holds one keep-alive connection, so one file descriptor and one local port: a client
#: address has about 28,000 ephemeral ports towards one server address (Linux's default
#: ``ip_local_port_range``), and one load process keeps a few thousand users' timings honest (the
#: self-check flags it beyond). 100,000 users is already a fleet of load generators against a fleet
#: of servers; a larger number is a typo (a few zeros too many), which would otherwise pass here and
#: fail at ``run`` on the open-file limit, far from the line that said it.
MAX_USERS = 100_000
#: The highest open-loop rate (``load.rates``, ``rate_start``/``rate_max``, ``--rates``), in requests
#: per second: one process sends a few hundred per second on time (benchmarks/RESULTS.md, open
#: loop), so 100,000/s is again far past any fleet of workers, and a larger one is a typo.
MAX_RATE_RPS = 100_000.0


def _at_most_users(value: int) -> int:
    """Refuse a level no fleet could run, with the bound and why (see :data:`MAX_USERS`)."""
    if value > MAX_USERS:
        raise ValueError(f"must be at most {MAX_USERS} users (got {value}): each user is a connection, "
                         "and more than this is a typo, not a plan (see 'Limits' in docs/scenarios.md)")
    return value


def _at_most_rate(value: float) -> float:
    """Refuse a rate no fleet could send, with the bound and why (see :data:`MAX_RATE_RPS`)."""
    if value > MAX_RATE_RPS:
        raise ValueError(f"must be at most {MAX_RATE_RPS:.0f} requests/s (got {value:.10g}): more than any "
                         "fleet of workers sends, so a typo (see 'Limits' in docs/scenarios.md)")
    return value


def number_text(value: float) -> str:
    """A level as a person wrote it: an integer in full (``:g`` would print 100000000 as ``1e+08``),
    a rate or speedup in at most six significant digits."""
    return str(value) if isinstance(value, int) else f"{value:g}"


#: A number of users: a positive count up to :data:`MAX_USERS`.
Users = Annotated[int, Strict(), Field(gt=0), AfterValidator(_at_most_users)]
#: A rate in requests per second: positive, finite, up to :data:`MAX_RATE_RPS`.
Rate = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False), AfterValidator(_at_most_rate)]


class _Strict(BaseModel):
    """Unknown keys are mistakes (usually typos), so they are rejected; so is an infinite number."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
