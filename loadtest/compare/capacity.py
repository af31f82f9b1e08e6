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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from loadtest.compare.change import Change
from loadtest.compare.rules import CAPACITY


@dataclass(frozen=True)
class CapacityBounds:
    lower: int  # 0 when even the lowest level is not a certain pass
    upper: float  # math.inf when no level certainly failed
    max_tested: int | None
    #: The lowest level measured: a run that certainly fails there holds "below" it, not "0 users".
    min_tested: int | None = None

    @classmethod
    def from_levels(cls, levels: Iterable[Mapping[str, Any]]) -> "CapacityBounds":
        usable = sorted(
            (lv for lv in levels if lv.get("status") not in (None, "no_data") and lv.get("concurrency") is not None),
            key=lambda lv: int(lv["concurrency"]),
        )
        lower = 0
        for lv in usable:
            if lv.get("status") != "pass" or lv.get("client_saturated") or lv.get("host_contended"):
                break
            lower = int(lv["concurrency"])
        upper: float = math.inf
        previous = 0
        for lv in usable:
            if lv.get("status") == "fail" and not (lv.get("client_saturated") or lv.get("host_contended")):
                upper = previous
                break
            previous = int(lv["concurrency"])
        return cls(lower, upper, int(usable[-1]["concurrency"]) if usable else None,
                   int(usable[0]["concurrency"]) if usable else None)

    @property
    def below_lowest(self) -> bool:
        """The lowest level tested certainly failed: the capacity is below every level measured."""
        return self.upper == 0 and self.max_tested is not None

    def lowest_words(self) -> str:
        """``below 1 user, the lowest level tested`` (the lowest level's users when known)."""
        low = self.min_tested
        return "below the lowest level tested" if low is None else f"below {_users(low)}, the lowest level tested"

    def text(self) -> str:
        """``16``, ``between 8 and 16``, ``at least 32``, ``below 1 user, the lowest level tested``;
        ``no level measured`` for a run without one."""
        if self.max_tested is None:
            return "no level measured"
        if self.below_lowest:
            return self.lowest_words()
        least = f"at least {self.lower}" if self.lower else "no level certain to pass"
        if math.isinf(self.upper):
            if self.lower == self.max_tested:
                return least
            return f"{least}, no certain failure up to {self.max_tested}"
        if self.upper == self.lower:
            return str(self.lower)
        return f"between {self.lower} and {int(self.upper)}"

    def to_dict(self) -> dict[str, Any]:
        return {"lower": self.lower, "upper": None if math.isinf(self.upper) else int(self.upper),
                "max_tested": self.max_tested, "min_tested": self.min_tested}


def _users(n: int) -> str:
    return f"{n} user" if n == 1 else f"{n} users"


def capacity_words(value: int, bounds: CapacityBounds) -> str:
    """A capacity in a message: ``4 users``, or ``below 1 user, the lowest level tested`` for a run that
    certainly failed its lowest level (its reported capacity is 0: "4 → 0 users" read as a level tested)."""
    if value == 0 and bounds.below_lowest:
        return bounds.lowest_words()
    if value == 0 and bounds.min_tested is not None:  # its lowest level was not a certain pass, nor a certain fail
        return f"0 users (not even {_users(bounds.min_tested)}, the lowest level tested, passed for certain)"
    return _users(value)


def reported(capacity: Mapping[str, Any], bounds: CapacityBounds) -> int:
    """The capacity the run reported, or its certain bound when the summary lacks it."""
    value = capacity.get("concurrency")
    return int(value) if isinstance(value, (int, float)) else bounds.lower


def capacity_change(
    base_cap: Mapping[str, Any], base: CapacityBounds, cand_cap: Mapping[str, Any], cand: CapacityBounds, gating: bool
):
    """The capacity check as a :class:`~loadtest.compare.change.Change` (see module doc)."""
    b, c = reported(base_cap, base), reported(cand_cap, cand)
    if cand.upper < base.lower:
        verdict, may = "regression", True
        fails = "at its lowest level" if cand.below_lowest else f"above {int(cand.upper)}"
        why = (f"capacity dropped for certain: {_arrow(b, base, c, cand)} (baseline certainly holds {base.lower}; "
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


def _arrow(b: int, base: CapacityBounds, c: int, cand: CapacityBounds) -> str:
    """``4 → 2 users``; a side below its lowest level in words (``4 users → below 1 user, …``)."""
    if not ((b == 0 and base.min_tested is not None) or (c == 0 and cand.min_tested is not None)):
        return f"{b} → {c} users"
    return f"{capacity_words(b, base)} → {capacity_words(c, cand)}"
