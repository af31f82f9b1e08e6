"""``load:``: the levels (closed loop) or rates (open loop), their durations and the stopping rules."""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator, model_validator

from loadtest.scenario._base import Int, NonNegativeFloat, NonNegativeInt, PositiveFloat, Rate, Users, _Strict, number_text


class ClientLimits(_Strict):
    """When the load generator itself is too busy to be trusted.

    A level is judged by whether the client's own measured timing error could
    move a verdict (load/monitor.py, analysis/client_error.py); above ``cpu_pct``
    of a core it is flagged whatever its verdicts. The two others are optional
    hard limits (off by default): a level past one is flagged too.
    """

    loop_lag_p99_ms: PositiveFloat | None = None
    reader_batch_p99_ms: PositiveFloat | None = None
    cpu_pct: PositiveFloat = 80.0


class Load(_Strict):
    levels: list[Users] | None = None
    start: Users | None = None
    step: PositiveFloat | None = None
    max: Users | None = None
    step_mode: Literal["multiply", "add"] = "multiply"
    #: Open loop (load/open_loop.py): requests per second per level, or rate_start/rate_step/rate_max.
    rates: list[Rate] | None = None
    rate_start: Rate | None = None
    rate_step: PositiveFloat | None = None
    rate_max: Rate | None = None
    #: Trace replay (load/trace_replay.py): each level replays workload.trace's window at this many
    #: times its own speed (arrival times / speedup), open loop.
    speedups: list[PositiveFloat] | None = None
    #: How the send times of an open-loop level are drawn (load/arrivals.py).
    arrival: Literal["poisson", "constant", "gamma"] = "poisson"
    #: Gamma arrivals' shape: 1 is Poisson, below 1 burstier, above 1 more regular.
    burstiness: PositiveFloat | None = None
    #: Open loop: at most this many requests in flight; arrivals beyond it fail as ``dropped``.
    max_in_flight: Users = 512
    #: Seeds the open-loop arrival streams (each level its own; with workers, load/arrivals.py share_offsets).
    arrival_seed: Int = 0
    level_duration_s: PositiveFloat = 30.0
    warmup_s: NonNegativeFloat = 5.0
    warmup_requests: NonNegativeInt = 5
    #: A level whose verdict is decided this long after it started ends early
    #: (default: half of its measured window, i.e. warmup + (duration − warmup) / 2).
    min_level_duration_s: PositiveFloat | None = None
    #: An undecided level runs on until it is decided or this long (default 4 × level_duration_s).
    max_level_duration_s: PositiveFloat | None = None
    client_limits: ClientLimits = ClientLimits()

    @field_validator("levels", "rates", "speedups")
    @classmethod
    def _rising(cls, values: list[float] | None) -> list[float] | None:
        """A sweep runs from low to high: capacity is the last level that holds before the first
        that fails, and a level's held-over requests belong to the one after it. A repeated or
        falling level has no place in that order, so it is refused rather than reordered."""
        for before, after in zip(values or [], (values or [])[1:]):
            if after <= before:
                word = "repeats" if after == before else "falls"
                raise ValueError(f"must rise from one level to the next ({number_text(before)} then {number_text(after)}: the sweep {word})")
        return values

    @model_validator(mode="after")
    def _one_way_to_give_levels(self) -> "Load":
        ranged = [k for k in ("start", "step", "max") if getattr(self, k) is not None]
        rate_ranged = [k for k in ("rate_start", "rate_step", "rate_max") if getattr(self, k) is not None]
        closed = self.levels is not None or bool(ranged)
        if self.levels is not None and ranged:
            raise ValueError(f"give either 'levels' or 'start/step/max', not both (found levels and {', '.join(ranged)})")
        if closed and (self.rates is not None or rate_ranged):
            given = ", ".join((["levels"] if self.levels is not None else []) + ranged)
            rates = ", ".join((["rates"] if self.rates is not None else []) + rate_ranged)
            raise ValueError(
                f"give either 'levels' (closed loop) or 'rates' (open loop), not both (found {given} and {rates})"
            )
        if self.speedups is not None:
            if closed or self.rates is not None or rate_ranged:
                given = ", ".join((["levels"] if self.levels is not None else []) + ranged + (["rates"] if self.rates is not None else []) + rate_ranged)
                raise ValueError(f"'speedups' (trace replay) replaces levels and rates: give one of them (found speedups and {given})")
            if not self.speedups:
                raise ValueError("'speedups' must not be empty")
        if self.burstiness is not None and self.arrival != "gamma":
            raise ValueError(f"'burstiness' applies to 'arrival: gamma' only (arrival is {self.arrival})")
        if not closed:
            if self.speedups is None:
                self._check_rates(rate_ranged)
        elif self.levels is None and not ranged:
            raise ValueError("give the concurrency levels: 'levels: [1, 2, 4]' or 'start', 'step' and 'max'")
        if ranged and len(ranged) != 3:
            missing = sorted({"start", "step", "max"} - set(ranged))
            raise ValueError(f"'start/step/max' needs all three; missing {', '.join(missing)}")
        if self.levels is not None and not self.levels:
            raise ValueError("'levels' must not be empty")
        # a value the scenario did not give is named as the default it is, not taken for a typo of the user's
        warm, level = f"{self.warmup_s:g}{self._default('warmup_s')}", f"{self.level_duration_s:g}{self._default('level_duration_s')}"
        if self.warmup_s >= self.level_duration_s:
            raise ValueError(f"'warmup_s' ({warm}) must be shorter than 'level_duration_s' ({level})")
        lo, hi = self.min_duration_s, self.max_duration_s
        if lo <= self.warmup_s:
            raise ValueError(f"'min_level_duration_s' ({lo:g}{self._default('min_level_duration_s')}) must be longer "
                             f"than 'warmup_s' ({warm})")
        if lo > self.level_duration_s:
            raise ValueError(f"'min_level_duration_s' ({lo:g}{self._default('min_level_duration_s')}) must not exceed "
                             f"'level_duration_s' ({level})")
        if hi < self.level_duration_s:
            raise ValueError(f"'max_level_duration_s' ({hi:g}{self._default('max_level_duration_s')}) must be at least "
                             f"'level_duration_s' ({level})")
        if ranged and self.start > self.max:
            raise ValueError(f"'start' ({self.start}) must not exceed 'max' ({self.max})")
        if ranged and self.step_mode == "multiply" and self.step <= 1:
            raise ValueError("'step' must be greater than 1 when step_mode is multiply")
        return self

    def _default(self, name: str) -> str:
        """' by default' for a field the scenario did not set (its message then names no value of the user's)."""
        return "" if name in self.model_fields_set else " by default"

    def _check_rates(self, rate_ranged: list[str]) -> None:
        if self.rates is None and not rate_ranged:
            raise ValueError(
                "give the load: concurrency 'levels: [1, 2, 4]' (or start/step/max), "
                "open-loop 'rates: [1, 2, 4]' (or rate_start/rate_step/rate_max), "
                "or with workload.trace 'speedups: [0.5, 1, 2]'"
            )
        if self.rates is not None and rate_ranged:
            raise ValueError(f"give either 'rates' or 'rate_start/rate_step/rate_max', not both (found rates and {', '.join(rate_ranged)})")
        if rate_ranged and len(rate_ranged) != 3:
            missing = sorted({"rate_start", "rate_step", "rate_max"} - set(rate_ranged))
            raise ValueError(f"'rate_start/rate_step/rate_max' needs all three; missing {', '.join(missing)}")
        if self.rates is not None and not self.rates:
            raise ValueError("'rates' must not be empty")
        if rate_ranged and self.rate_start > self.rate_max:
            raise ValueError(f"'rate_start' ({self.rate_start:g}) must not exceed 'rate_max' ({self.rate_max:g})")
        if rate_ranged and self.step_mode == "multiply" and self.rate_step <= 1:
            raise ValueError("'rate_step' must be greater than 1 when step_mode is multiply")

    @property
    def open_loop(self) -> bool:
        """Rates (requests per second) rather than concurrency levels."""
        return self.rates is not None or self.rate_start is not None

    @property
    def trace_replay(self) -> bool:
        """Speedups of a trace (workload.trace) rather than concurrency levels or rates."""
        return self.speedups is not None

    def rate_levels(self) -> list[float]:
        """The open-loop rates in run order: as given, or generated from rate_start/rate_step/rate_max."""
        if self.rates is not None:
            return [float(r) for r in self.rates]
        if self.rate_start is None:
            return []
        out: list[float] = []
        value = float(self.rate_start)
        while value <= self.rate_max * (1 + 1e-9):
            out.append(round(value, 6))
            value = value * self.rate_step if self.step_mode == "multiply" else value + self.rate_step
        return out

    @property
    def min_duration_s(self) -> float:
        """When a decided level may end (see ``min_level_duration_s``)."""
        if self.min_level_duration_s is not None:
            return self.min_level_duration_s
        return self.warmup_s + (self.level_duration_s - self.warmup_s) / 2

    @property
    def max_duration_s(self) -> float:
        """How long an undecided level may run (see ``max_level_duration_s``)."""
        return self.max_level_duration_s if self.max_level_duration_s is not None else 4 * self.level_duration_s

    def concurrency_levels(self) -> list[int]:
        """The levels in run order: as given, or generated from start/step/max (empty in open loop)."""
        if self.levels is not None:
            return list(self.levels)
        if self.start is None:
            return []
        out: list[int] = []
        value = float(self.start)
        while round(value) <= self.max:
            level = int(round(value))
            if not out or level > out[-1]:
                out.append(level)
            value = value * self.step if self.step_mode == "multiply" else value + self.step
        return out
