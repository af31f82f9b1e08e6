"""Could the client's own timing error change a level's verdict?

The load stage measures, per level, how late its own timestamps can be
(:mod:`loadtest.load.monitor`): ``itl_error_bound_ms`` for a gap between two
chunk stamps, ``ttft_error_bound_ms`` for a span that starts with a send (the
send may run late too). A fixed limit on those delays would flag a level
whose numbers are plainly right (the demo's, at 4% of what one process
handles) and miss one that sits right on its limit. So the question is asked
of each verdict instead: a level is ``client_saturated`` only when the bound
could move a check across its limit.

* TTFT, TTFB and e2e: the client's delay only ever *adds* time (a late send, a
  late stamp), so only a value above its limit by no more than the bound could
  really be under it.
* ITL and TPOT: a late stamp lengthens one gap and shortens the next, so a
  value within the bound of its limit, on either side, could be on the other.

**How large an error, for which percentile.** The delays come as quantile
tables, one value per read. A gap is off by at most the delay of one of its
two stamps (its later stamp makes it longer, its earlier one shorter). So if
all but a fraction x of stamps are late by at most D(x), all but 2x of gaps
are off by at most D(x), and with ``x = (1 − q) / 2`` the gap error at
percentile q is at most D(x): a p95 check allows for the p97.5 delay, a p99
check for the p99.5 delay, a p50 check for the p75 delay. This is the claim
``benchmarks/bench_selfcheck.py`` tests against the mock's own send stamps.
(An earlier rule took ``x = (1 − q) / 4``, a margin on top; on a quiet
machine it flagged levels whose true gap error was a fifth of its bound.) Where the server's own gap
distribution is very steep right at the percentile, the percentile can move
further than the gap error; that is a property of the server's distribution,
which the verdict's confidence interval speaks to. A span that starts with a
send (TTFT, TTFB, e2e) adds the send delay at the same quantile.

The error budget is counted, not timed: the client's delay cannot move it.
Runs recorded before these bounds existed keep the monitor's own flag.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from loadtest.analysis.results import Check, LevelResult
from loadtest.analysis.slo import METRIC_LABELS, PERCENTILES

#: Below this share of a core, a client flagged only by a verdict within its timing error of a limit is
#: called quiet (``client_near_limit``): its stamps were late by waking up on the host, not by its own work.
#: Between this and the self-check's CPU limit (80%), its own work may be part of the delay: the
#: saturated client's words, and the --workers advice, stay.
QUIET_CLIENT_CPU_PCT = 50.0

#: Per metric: does a send start it (send delay adds), and can the client only inflate it?
SPANS = {
    "ttft_ms": (True, True),
    "ttfb_ms": (True, True),
    "e2e_ms": (True, True),
    "itl_ms": (False, False),
    "tpot_ms": (False, False),
}


def delay_for_percentile(table: Mapping[str, float], q: float) -> float:
    """The delay (ms) at quantile ``1 − (1 − q) / 2`` of a quantile table (linear between entries)."""
    points = sorted((float(k), float(v)) for k, v in table.items() if k != "max")
    if not points:
        return 0.0
    target = 1.0 - (1.0 - q) / 2.0
    if target > points[-1][0] + 1e-12:
        return float(table.get("max", points[-1][1]))
    qs, vs = zip(*points)
    return float(np.interp(target, qs, vs))


def error_bound(client: Mapping[str, Any], metric: str, q: float) -> float:
    """How far the client's own delays could move percentile ``q`` of ``metric`` (ms)."""
    starts_with_send, _ = SPANS[metric]
    bound = delay_for_percentile(client.get("stamp_delay_ms") or {}, q)
    if starts_with_send:
        bound += delay_for_percentile(client.get("send_delay_ms") or {}, q)
    return bound


def could_flip(check: Check, bound: float, inflate_only: bool) -> bool:
    """Could an error of up to ``bound`` ms put the check's value on the other side of its limit?

    Undecided checks count too: if the client's own error spans the limit, no
    longer level will decide them right.
    """
    if not math.isfinite(check.value) or check.verdict not in ("pass", "fail", "uncertain"):
        return False
    distance = check.value - check.limit
    if inflate_only:
        return 0 < distance <= bound
    return abs(distance) <= bound


def judge_client(level: LevelResult) -> LevelResult:
    """Flag ``level`` as client_saturated when its timing error could flip a verdict (returned for chaining)."""
    client = level.client
    if not client or "stamp_delay_ms" not in client:
        return level
    # the self-check's own flag (CPU, loop lag, reader): the client was busy, whatever the verdicts
    busy = level.client_saturated or bool(client.get("saturated"))
    reasons = [str(client["reason"])] if client.get("saturated") and client.get("reason") else []
    near: list[str] = []
    certain_fail = False  # a check that fails beyond anything the client's error could move
    for check in level.checks:
        if check.metric not in SPANS or check.percentile is None:
            certain_fail = certain_fail or check.verdict == "fail"  # an error budget, a floor: no timing in it
            continue
        bound = error_bound(client, check.metric, PERCENTILES[check.percentile])
        if could_flip(check, bound, inflate_only=SPANS[check.metric][1]):
            near.append(
                f"{METRIC_LABELS[check.metric]} {check.percentile} {check.value:.1f} ms against {check.limit:g} ms; "
                f"the client's timing error bound is {bound:.1f} ms, so this level cannot be judged"
            )
        elif check.verdict == "fail":
            certain_fail = True
    # A level fails on any one check: one that fails for certain, out of the error's reach, decides it
    # whatever a check near its limit reads (a trial's chat TTFT p50 643 ms against 300 read "cannot be
    # judged" for an undecided ITL within 2.6 ms of its limit).
    if not certain_fail:
        reasons += near
    if reasons:
        level.client_saturated = True
        cpu = client.get("cpu_pct")
        # a quiet client: its own work is not what made its stamps late, so more workers would not help
        level.client_near_limit = not busy and cpu is not None and float(cpu) < QUIET_CLIENT_CPU_PCT
        level.client = {**client, "saturated": True, "reason": "; ".join(reasons)}
    return level
