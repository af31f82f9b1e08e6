"""Capacity against capacity: a certain drop is a regression, whatever the tolerance.

Each run's capacity is bracketed from its levels' statuses alone (stable keys
of summary.json, so this holds whatever the capacity verdict's wording):

* ``lower``: the highest level such that every level up to it *certainly*
  passed (an uncertain or client-saturated level ends the run of passes);
* ``upper``: the last level below the first level that *certainly* failed
  (no certain failure: unbounded, "at least the highest tested").

The true capacity lies in ``[lower, upper]``. The candidate dropped for sure
when its upper bound is below the baseline's lower bound: a regression. An
observed drop that the brackets do not prove (it depends on an uncertain
level) is inconclusive. A candidate whose lower bound is above the baseline's
upper bound improved.

A run whose lowest level certainly failed has a capacity below that level, not
"0 users": it is said so ("below 1 user, the lowest level tested"), as the
numbers (``capacity``, ``bounds.upper`` 0) stay.

A rate run (open loop, trace replay) is bracketed the same way over its rates (or speedups), and its
capacity is ``capacity.rate_rps`` (``capacity.speedup``): :mod:`level_keys`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from loadtest.compare.change import Change
from loadtest.compare.level_keys import (CAPACITY_KEY, SPEEDUP, USERS, LevelKey, level_key, load_change, load_text, number,
                                         unit_of)
from loadtest.compare.rules import CAPACITY


@dataclass(frozen=True)
class CapacityBounds:
    lower: LevelKey  # 0 when even the lowest level is not a certain pass
    upper: float  # math.inf when no level certainly failed
    max_tested: LevelKey | None
    #: The lowest level measured: a run that certainly fails there holds "below" it, not "0 users".
    min_tested: LevelKey | None = None
    #: What the levels count (:mod:`level_keys`): ``users``, ``req/s`` or ``×``.
    unit: str = USERS

    @classmethod
    def from_levels(cls, levels: Iterable[Mapping[str, Any]]) -> "CapacityBounds":
        levels = list(levels)
        usable = sorted(
            (lv for lv in levels if lv.get("status") not in (None, "no_data") and level_key(lv) is not None),
            key=level_key,  # type: ignore[arg-type]
        )
        lower: LevelKey = 0
        for lv in usable:
            if lv.get("status") != "pass" or lv.get("client_saturated") or lv.get("host_contended"):
                break
            lower = level_key(lv)  # type: ignore[assignment]
        upper: float = math.inf
        previous: LevelKey = 0
        for lv in usable:
            if lv.get("status") == "fail" and not (lv.get("client_saturated") or lv.get("host_contended")):
                upper = previous
                break
            previous = level_key(lv)  # type: ignore[assignment]
        return cls(lower, upper, level_key(usable[-1]) if usable else None,
                   level_key(usable[0]) if usable else None, unit_of(levels))

    @property
    def below_lowest(self) -> bool:
        """The lowest level tested certainly failed: the capacity is below every level measured."""
        return self.upper == 0 and self.max_tested is not None

    def lowest_words(self) -> str:
        """``below 1 user, the lowest level tested`` (the lowest level's users when known)."""
        low = self.min_tested
        return "below the lowest level tested" if low is None else f"below {_level(low, self.unit)}, the lowest level tested"

    def text(self) -> str:
        """``16``, ``between 8 and 16``, ``at least 32``, ``below 1 user, the lowest level tested``;
        ``no level measured`` for a run without one."""
        if self.max_tested is None:
            return "no level measured"
        if self.below_lowest:
            return self.lowest_words()
        n = self._n
        least = f"at least {n(self.lower)}" if self.lower else "no level certain to pass"
        if math.isinf(self.upper):
            if self.lower == self.max_tested:
                return least
            return f"{least}, no certain failure up to {n(self.max_tested)}"  # type: ignore[arg-type]
        if self.upper == self.lower:
            return n(self.lower)
        return f"between {n(self.lower)} and {n(self.upper)}"

    def text_at_a_rate(self) -> str:
        """:meth:`text` with a rate run's unit (``between 2 and 4 req/s``, ``at least 1.5×``); a closed
        loop's as it always read (``between 8 and 16``)."""
        text = self.text()
        if self.unit == USERS or self.max_tested is None or self.below_lowest:  # "below 4 req/s, …" says it
            return text
        return text + (self.unit if self.unit == SPEEDUP else f" {self.unit}")

    def _n(self, value: float) -> str:
        return number(value, self.unit)

    def to_dict(self) -> dict[str, Any]:
        whole = int if self.unit == USERS else float  # users are counted; a rate or speedup is not
        return {"lower": self.lower, "upper": None if math.isinf(self.upper) else whole(self.upper),
                "max_tested": self.max_tested, "min_tested": self.min_tested}


def _level(n: float, unit: str) -> str:
    """``1 user``, ``4 users``; at a rate ``4 req/s``, ``1.5×``."""
    if unit != USERS:
        return load_text(n, unit)
    return f"{n} user" if n == 1 else f"{n} users"


def capacity_words(value: LevelKey, bounds: CapacityBounds) -> str:
    """A capacity in a message: ``4 users``, or ``below 1 user, the lowest level tested`` for a run that
    certainly failed its lowest level (its reported capacity is 0: "4 → 0 users" read as a level tested)."""
    if value == 0 and bounds.below_lowest:
        return bounds.lowest_words()
    if value == 0 and bounds.min_tested is not None:  # its lowest level was not a certain pass, nor a certain fail
        return (f"{_level(0, bounds.unit)} (not even {_level(bounds.min_tested, bounds.unit)}, the lowest level "
                "tested, passed for certain)")
    return _level(value, bounds.unit)


def reported(capacity: Mapping[str, Any], bounds: CapacityBounds) -> LevelKey:
    """The capacity the run reported (``capacity.concurrency``, at a rate ``capacity.rate_rps`` or
    ``capacity.speedup``), or its certain bound when the summary lacks it."""
    value = capacity.get(CAPACITY_KEY[bounds.unit])
    if not isinstance(value, (int, float)):
        return bounds.lower
    return int(value) if bounds.unit == USERS else float(value)


def capacity_change(
    base_cap: Mapping[str, Any], base: CapacityBounds, cand_cap: Mapping[str, Any], cand: CapacityBounds, gating: bool
):
    """The capacity check as a :class:`~loadtest.compare.change.Change` (see module doc)."""
    b, c = reported(base_cap, base), reported(cand_cap, cand)
    if cand.upper < base.lower:
        verdict, may = "regression", True
        fails = "at its lowest level" if cand.below_lowest else f"above {number(cand.upper, cand.unit)}"
        why = (f"capacity dropped for certain: {_arrow(b, base, c, cand)} (baseline certainly holds "
               f"{number(base.lower, base.unit)}; "
               f"the candidate certainly fails {fails})")
    elif c < b:
        verdict, may = "inconclusive", True
        why = (f"capacity {_arrow(b, base, c, cand)}, but the drop depends on an uncertain level "
               f"(baseline {base.text()}, candidate {cand.text()})")
    elif cand.lower > base.upper:
        verdict, may = "improvement", False
        why = f"capacity rose for certain: {_arrow(b, base, c, cand)}"
    else:
        verdict, may = "unchanged", False
        why = f"capacity {_arrow(b, base, c, cand)} (baseline {base.text()}, candidate {cand.text()})"
    return Change(
        check=CAPACITY, kind=CAPACITY, level=None, baseline=float(b), candidate=float(c),
        change=(c / b - 1.0) if b else None, ci=(None, None), relative=True, tolerance=None,
        verdict=verdict, may_regress=may, gating=gating, message=why,
    )


def _arrow(b: LevelKey, base: CapacityBounds, c: LevelKey, cand: CapacityBounds) -> str:
    """``4 → 2 users`` (``16 → 4 req/s``, ``2× → 1.5×``); a side below its lowest level in words
    (``4 users → below 1 user, …``)."""
    if not ((b == 0 and base.min_tested is not None) or (c == 0 and cand.min_tested is not None)):
        return load_change(b, c, cand.unit)
    return f"{capacity_words(b, base)} → {capacity_words(c, cand)}"
