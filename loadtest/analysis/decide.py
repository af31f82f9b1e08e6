"""Is a level decided yet? The question the load stage asks while a level runs.

A level should run exactly as long as its verdict needs: a level that is
clearly passing or clearly failing can end early, and an undecided one should
run on until it is decided (or a budget runs out). The load stage asks this
module at fixed times (*looks*); the answer is the analysis itself, run on the
records so far, never a second copy of it.

**A fixed schedule of looks, and a corrected confidence.** Looking at the data
again and again and stopping at the first look that seems decided inflates the
chance of a wrong verdict: each look is another chance for noise to cross the
line. The looks are therefore fixed in advance: ``min_level_duration_s``
doubling while below ``level_duration_s``, then ``level_duration_s`` doubling up
to ``max_level_duration_s`` (with the defaults: half the measured window, then
1, 2 and 4 × ``level_duration_s``, so K = 4; with 15 s levels and a 4 s minimum:
4, 8, 15, 30 and 60 s, K = 5), and every look judges at confidence
``1 − 0.05 / K`` (Bonferroni). Whatever look a level stops at, the chance that
its verdict is wrong stays within 5%. Bonferroni is slightly conservative
compared with group-sequential boundaries (Pocock, O'Brien–Fleming), but it
needs no assumption about how the statistic evolves between looks, which
percentiles of correlated latency samples do not satisfy anyway.

**Requests in flight count.** At a look, the records on disk only hold
finished requests; the ones still waiting for their first token are the slow
tail. The caller passes them in (start time and how long they have waited),
and they enter the analysis as *censored* requests, the same rule as for
requests cut at the end of a probe (:mod:`frame`): a wait already past the
limit is a certain miss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from loadtest.analysis import analyze
from loadtest.analysis.decision_reason import level_why
from loadtest.analysis.results import LevelStatus
from loadtest.analysis.slo import SloSpec
from loadtest.analysis.verdict import check_key
from loadtest.metric_registry import names

#: Overall chance of a wrong verdict per level that the schedule is corrected for.
ALPHA = 0.05


@dataclass(frozen=True)
class LookSchedule:
    """When a level is looked at, from its start (seconds), and at what confidence."""

    min_s: float
    nominal_s: float
    max_s: float

    @property
    def looks(self) -> list[float]:
        """``min_s`` doubling up to ``nominal_s``, then ``nominal_s`` doubling up to and including ``max_s``."""
        points = {round(self.min_s, 6), round(self.max_s, 6)}
        for start, end in ((self.min_s, self.nominal_s), (self.nominal_s, self.max_s)):
            t = start
            while t < end - 1e-9:
                if t >= self.min_s:
                    points.add(round(t, 6))
                t *= 2
        return sorted(points)

    @property
    def adaptive(self) -> bool:
        return len(self.looks) > 1

    @property
    def confidence(self) -> float:
        """Two-sided confidence of every look (1 − α/K)."""
        return 1.0 - ALPHA / len(self.looks)


#: Metrics whose samples are requests (one per request), not chunk gaps: the registry's ``per="request"``.
PER_REQUEST = names(kind="latency", per="request")
#: Finished requests a look waits for when the SLO judges only chunk gaps (ITL): a level without
#: a measured request is ``no_data``, and a look taken then is one spent on nothing. One is enough:
#: ITL samples come from every chunk that arrives in the window, whichever request it belongs to.
MIN_LOOK_REQUESTS = 1


def requests_for_a_look(slos: Iterable[SloSpec]) -> int:
    """How many measured requests a look needs before it can decide a pass of every percentile.

    A percentile ``q`` of fewer than ``1 / (1 − q)`` samples is only the largest
    sample and is judged ``too few samples`` (:mod:`verdict`): p95 needs 20
    requests, p99 100. The load stage defers a due look until the level has
    that many (see :mod:`loadtest.load.shape`); the count says nothing about
    the values, so deferring never biases a verdict, and a deferred look that
    the next one overtakes is dropped, so no level takes more than K looks.
    """
    need = MIN_LOOK_REQUESTS
    for slo in slos:
        for check in slo.checks:
            if check.metric in PER_REQUEST:
                need = max(need, math.ceil(1.0 / (1.0 - check.q) - 1e-9))
    return need


@dataclass(frozen=True)
class Decision:
    """The verdict of a level at one look."""

    verdict: LevelStatus  # pass / fail / uncertain / no_data
    why: str  # one line for the live view and run.json
    #: The check that decided a ``fail`` (e.g. ``"ttft_ms.p95"``), None otherwise (run.json ``check``).
    check: str | None = None
    #: Each percentile check's measured value and its limit at this look, by check key
    #: (``"itl_ms.p95"``, ``"long.tpot_ms.p95"``): what ``--refine`` extrapolates to place a probe
    #: (:func:`loadtest.analysis.refine.probe_before`). Only finite values.
    observed: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def decided(self) -> bool:
        return self.verdict in ("pass", "fail")


#: Columns of an in-flight snapshot (one row per request still running at the look).
#: ``class``: the request class; ``schedule_lag_ms``: open loop, how late it went out (None in closed
#: loop); the frame then judges its wait from the scheduled time, as for finished requests.
IN_FLIGHT_COLUMNS = (
    "level_index", "warmup", "start_wall", "elapsed_ms", "ttfb_ms", "ttft_ms", "class", "schedule_lag_ms",
)


def in_flight_records(in_flight: pd.DataFrame, level: int) -> pd.DataFrame:
    """Requests still running, as censored (``cancelled``) records at their current wait."""
    n = len(in_flight)
    if n == 0:
        return pd.DataFrame()
    extra = {}
    if "schedule_lag_ms" in in_flight and in_flight["schedule_lag_ms"].notna().any():
        lag = in_flight["schedule_lag_ms"].to_numpy(dtype=float)
        start = in_flight["start_wall"].to_numpy(dtype=float)
        extra = {"schedule_lag_ms": lag, "scheduled_wall": start - np.nan_to_num(lag) / 1000.0}
    return pd.DataFrame(
        {
            "request_id": [f"in-flight-{i}" for i in range(n)],
            "worker": "in-flight",
            "level": level,
            "level_index": in_flight["level_index"].to_numpy(),
            "warmup": in_flight["warmup"].to_numpy(dtype=bool),
            "start_wall": in_flight["start_wall"].to_numpy(dtype=float),
            "ttfb_ms": in_flight["ttfb_ms"].to_numpy(dtype=float),
            "ttft_ms": in_flight["ttft_ms"].to_numpy(dtype=float),
            "e2e_ms": in_flight["elapsed_ms"].to_numpy(dtype=float),
            "ok": False,
            "error_kind": "cancelled",
            "completion_tokens": np.nan,
            "chunk_ms": [[] for _ in range(n)],
            "chunk_tokens": [[] for _ in range(n)],
            # the request class (workload.classes), so a waiting request counts against its class's SLO
            "class": in_flight["class"].to_numpy(dtype=object) if "class" in in_flight else None,
            **extra,
        }
    )


def decide_level(
    requests: pd.DataFrame,
    run: Mapping[str, Any],
    slo: SloSpec,
    level: Mapping[str, Any],
    now_wall: float,
    confidence: float,
    in_flight: pd.DataFrame | None = None,
) -> Decision:
    """The verdict of the running ``level`` (a run.json level entry) on the data so far."""
    index = int(level["index"])
    mine = requests[requests["level_index"] == index] if len(requests) else requests
    if in_flight is not None and len(in_flight):
        running = in_flight[in_flight["level_index"] == index]
        extra = in_flight_records(running, int(level["concurrency"]))
        mine = pd.concat([mine, extra], ignore_index=True) if len(extra) else mine
    span = {**dict(level), "end_wall": now_wall}
    partial = {**dict(run), "levels": [span], "ended_wall": now_wall}
    analysis = analyze(mine.reset_index(drop=True), partial, slo, confidence=confidence)
    if not analysis.levels:
        return Decision("no_data", "no request measured yet")
    result = analysis.levels[0]
    failing = next((check_key(c) for c in result.checks if c.verdict == "fail"), None)
    observed = {
        check_key(c): (float(c.value), float(c.limit))
        for c in result.checks
        if c.percentile is not None and math.isfinite(c.value) and math.isfinite(c.limit)
    }
    return Decision(result.status, level_why(result), failing if result.status == "fail" else None, observed)
