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

A rate run (open loop, trace replay) is bracketed the same way over its rates (or speedups), and its
capacity is ``capacity.rate_rps`` (``capacity.speedup``): :mod:`level_keys`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from loadtest.compare.change import Change
from loadtest.compare.level_keys import CAPACITY_KEY, SPEEDUP, USERS, LevelKey, level_key, load_change, number, unit_of
from loadtest.compare.rules import CAPACITY


@dataclass(frozen=True)
class CapacityBounds:
    lower: LevelKey  # 0 when even the lowest level is not a certain pass
    upper: float  # math.inf when no level certainly failed
    max_tested: LevelKey | None
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
        return cls(lower, upper, level_key(usable[-1]) if usable else None, unit_of(levels))

    def text(self) -> str:
        """``16``, ``between 8 and 16``, ``at least 32``; ``no level measured`` for a run without one."""
        if self.max_tested is None:
            return "no level measured"
        n = self._n
        if math.isinf(self.upper):
            if self.lower == self.max_tested:
                return f"at least {n(self.lower)}"
            return f"at least {n(self.lower)}, no certain failure up to {n(self.max_tested)}"
        if self.upper == self.lower:
            return n(self.lower)
        return f"between {n(self.lower)} and {n(self.upper)}"

    def text_at_a_rate(self) -> str:
        """:meth:`text` with a rate run's unit (``between 2 and 4 req/s``, ``at least 1.5×``); a closed
        loop's as it always read (``between 8 and 16``)."""
        text = self.text()
        if self.unit == USERS or self.max_tested is None:
            return text
        return text + (self.unit if self.unit == SPEEDUP else f" {self.unit}")

    def _n(self, value: float) -> str:
        return number(value, self.unit)

    def to_dict(self) -> dict[str, Any]:
        whole = int if self.unit == USERS else float  # users are counted; a rate or speedup is not
        return {"lower": self.lower, "upper": None if math.isinf(self.upper) else whole(self.upper),
                "max_tested": self.max_tested}


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
    unit = cand.unit
    if cand.upper < base.lower:
        verdict, may = "regression", True
        why = (f"capacity dropped for certain: {load_change(b, c, unit)} (baseline certainly holds {number(base.lower, unit)}; "
               f"the candidate certainly fails above {number(cand.upper, unit)})")
    elif c < b:
        verdict, may = "inconclusive", True
        why = (f"capacity {load_change(b, c, unit)}, but the drop depends on an uncertain level "
               f"(baseline {base.text()}, candidate {cand.text()})")
    elif cand.lower > base.upper:
        verdict, may = "improvement", False
        why = f"capacity rose for certain: {load_change(b, c, unit)}"
    else:
        verdict, may = "unchanged", False
        why = f"capacity {load_change(b, c, unit)} (baseline {base.text()}, candidate {cand.text()})"
    return Change(
        check=CAPACITY, kind=CAPACITY, level=None, baseline=float(b), candidate=float(c),
        change=(c / b - 1.0) if b else None, ci=(None, None), relative=True, tolerance=None,
        verdict=verdict, may_regress=may, gating=gating, message=why,
    )
