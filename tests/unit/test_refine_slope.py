"""``--refine``'s probes placed by the measured slope (:mod:`loadtest.analysis.refine`).

The server of issue 23's held-out case: ITL = 20 + 18 x users ms, SLO itl_ms.p95 <= 191,
so 9 users hold (182 ms) and 10 do not (200 ms). Bisection from the sweep 1, 2, 4, 8, 16
probes 16, 12, 10 and 9; the slope says "about 9.5" after 8, so 10 and then 9 are enough.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from loadtest.analysis.refine import crossing, next_refine_level, probe_before

LIMIT = 191.0


def itl(users: int) -> float:
    return 20.0 + 18.0 * users


def values(users: int, key: str = "itl_ms.p95", limit: float = LIMIT) -> dict[str, tuple[float, float]]:
    return {key: (itl(users), limit)}


@dataclass
class _Check:
    name: str
    value: float
    limit: float
    percentile: str | None = "p95"
    class_name: str | None = None


@dataclass
class _Level:
    concurrency: int
    passed: bool | None
    checks: list = field(default_factory=list)


def level(users: int, passed: bool) -> _Level:
    return _Level(users, passed, [_Check("itl_ms.p95", itl(users), LIMIT), _Check("error_rate", 0.0, 0.01, None)])


def test_the_sweep_probes_the_first_level_the_slope_says_fails():
    assert crossing([(4, values(4)), (8, values(8))]) == pytest.approx(9.5)
    assert probe_before([(2, values(2)), (4, values(4)), (8, values(8))], 16) == 10


def test_no_probe_when_the_line_does_not_reach_a_limit_before_the_next_level():
    assert probe_before([(1, values(1)), (2, values(2))], 4) is None  # crossing at 9.5: beyond 4
    flat = {"ttft_ms.p95": (40.0, 150.0)}
    assert probe_before([(4, flat), (8, flat)], 16) is None  # slots not full yet: TTFT flat
    falling = [(4, {"ttft_ms.p95": (60.0, 150.0)}), (8, {"ttft_ms.p95": (50.0, 150.0)})]
    assert probe_before(falling, 16) is None
    assert probe_before([(8, values(8))], 16) is None  # one point is no slope


def test_the_tightest_check_places_the_probe_and_classes_count_apart():
    points = [
        (4, {"itl_ms.p95": (itl(4), LIMIT), "long.tpot_ms.p95": (100.0, 137.0)}),
        (6, {"itl_ms.p95": (itl(6), LIMIT), "long.tpot_ms.p95": (130.0, 137.0)}),
    ]
    assert crossing(points) == pytest.approx(6 + 7 / 15)  # the class's TPOT, long before the ITL
    assert probe_before(points, 8) == 7
    assert probe_before([(4, {"a.x.p95": (1.0, 9.0)}), (6, {"b.x.p95": (2.0, 9.0)})], 8) is None


def test_refine_interpolates_inside_the_bracket_and_closes_it():
    seen = [level(c, c <= 9) for c in (1, 2, 4, 8, 16)]
    seen = [lv for lv in seen if lv.concurrency != 16] + [level(16, False)]
    assert next_refine_level(seen) == 10  # 8 + (191 - 164) / 18 = 9.5: the first failing integer
    seen.append(level(10, False))
    assert next_refine_level(seen) == 9
    seen.append(level(9, True))
    assert next_refine_level(seen) is None  # 9 passes, 10 fails: the truth, in two probes not three


def test_a_wrong_slope_still_shrinks_the_bracket_by_a_quarter():
    # a check that hardly rises between the ends would put the probe next to the failure
    flat = [_Level(8, True, [_Check("itl_ms.p95", 100.0, 191.0)]), _Level(16, False, [_Check("itl_ms.p95", 192.0, 191.0)])]
    assert next_refine_level(flat) == 14  # at 15.9 by the line: kept a quarter of 8 from 16
    low = [_Level(8, True, [_Check("itl_ms.p95", 190.0, 191.0)]), _Level(16, False, [_Check("itl_ms.p95", 400.0, 191.0)])]
    assert next_refine_level(low) == 10  # at 8.04 by the line: kept a quarter of 8 from 8


def test_without_values_refine_bisects_as_before():
    assert next_refine_level([(8, True), (16, False)]) == 12
    assert next_refine_level([_Level(8, True), _Level(16, False)]) == 12  # no checks measured
