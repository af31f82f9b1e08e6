"""A target that stopped answering during the run: an outage, not a capacity.

When the server dies (killed, out of memory, a crash under load) or the endpoint goes away,
every request after its last success fails to connect (``connect``: refused, reset, a TLS
handshake cut) or is cut mid-stream (``disconnect``). Those failures are counted, never
dropped: the level fails its error budget, and its TTFT, since a failure is +inf. But the
verdict's words were the load's: "This endpoint holds 1 concurrent user within the SLOs; at 2
the p95 TTFT is unbounded", exit 0, with autoscaling advice, and the scrape warning added
"(the load was not affected)" (a trial killed llama-server 2 s into a level). A nightly job
read a capacity off a server that was gone.

The signature is kept narrow, so that an overloaded server is never taken for a dead one:

* the failures come *after the last success of the run* (a server that answers again later
  had an outage the error budget judges, and is not "lost");
* the run ends on a streak of them, every one ``connect`` or ``disconnect`` (a timeout or a
  5xx is a live server's answer; one shutting down gracefully gives 503s first, and the
  streak after them is the outage); requests the harness cancelled and arrivals dropped at
  ``max_in_flight`` say nothing either way and are left aside;
* at least :data:`MIN_REQUESTS` of them, :data:`MIN_REFUSED` of which the target answered
  nothing to: refused connections, or connections closed before the response head (a dead
  server's last accepted ones, and every one through a tunnel or TCP proxy to it:
  ``client.record.answered_nothing``). A proxy cutting a live server's queued streams
  leaves only cuts after the head. Over at least :data:`MIN_SPAN_S` seconds: a handful of
  refused connections in the last instant of an overloaded run is not an outage; unless the
  target still answered nothing to the one request the run sent once its load had ended
  (run.json's ``after_load``, :mod:`loadtest.after_load`): a server killed a moment before the
  look that ended its level left a streak shorter than that, and read as a capacity.

What holds below the level where it happened was measured on a live server and stays: the
capacity is its lower bound, and the sentence says both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.columns import boolean, numeric, text
from loadtest.analysis.results import LevelResult
from loadtest.client.record import answered_nothing

#: The failures of a target that is not there: nothing answered, or the stream was cut.
LOST_KINDS = frozenset({"connect", "disconnect"})
#: Neither a success nor a failure of the server: the harness's own cuts and drops.
NEUTRAL_KINDS = frozenset({"cancelled", "dropped"})
MIN_REQUESTS = 5
#: of which answered nothing (refused, or closed before the response head), not only cut streams
MIN_REFUSED = 3
MIN_SPAN_S = 0.5


@dataclass
class TargetLost:
    """When the target stopped answering, where, and what the requests after it met."""

    #: the first failure after the run's last success (when it failed, wall-clock seconds)
    at_wall: float
    #: the level then in force (its label, index and how far into it: negative between two levels, before
    #: the next one, which measured only the outage), None before the first level
    level: str | None
    level_index: int | None
    seconds_into_level: float | None
    #: requests after the last success, all failed: by kind (connect, disconnect)
    requests: int
    kinds: dict[str, int]
    #: the last success's end (wall-clock), None when no request of the run succeeded
    last_success_wall: float | None
    #: the outage decided where the capacity stops (the sentence leads with it): set by the pipeline
    decides_capacity: bool = False
    #: the request sent once the load had ended (run.json's ``after_load``) was not answered either;
    #: None when none was sent (the run did not end on such a streak, or was written before)
    confirmed_after_load: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "at_wall": round(self.at_wall, 3),
            "level": self.level,
            "level_index": self.level_index,
            "seconds_into_level": None if self.seconds_into_level is None else round(self.seconds_into_level, 1),
            "requests": self.requests,
            "kinds": dict(self.kinds),
            "last_success_wall": None if self.last_success_wall is None else round(self.last_success_wall, 3),
            "decides_capacity": self.decides_capacity,
            "confirmed_after_load": self.confirmed_after_load,
        }

    def words(self) -> str:
        """"the target stopped answering 2.1 s into the level of 2 users: 16 requests after its last
        success, none answered (connect 14, disconnect 2)"."""
        if self.level is None:
            where = " before the first level"
        elif self.seconds_into_level is not None and self.seconds_into_level < 0:
            where = f" {-self.seconds_into_level:.1f} s before the level of {self.level} began"
        else:
            where = f" {self.seconds_into_level or 0.0:.1f} s into the level of {self.level}"
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items(), key=lambda kv: (-kv[1], kv[0])))
        after = "after its last success" if self.last_success_wall is not None else "of the run"
        again = ", nor did the one sent after the load" if self.confirmed_after_load else ""
        return (f"the target stopped answering{where}: the {self.requests} requests {after} could not "
                f"connect or were cut off ({kinds}), and none succeeded again{again}")


@dataclass(frozen=True)
class _Streak:
    """The run's closing streak (a mask over the records) and the columns it was read from."""

    after: np.ndarray
    end: np.ndarray
    kinds: np.ndarray
    last_ok: float | None


def closing_streak(requests: pd.DataFrame) -> np.ndarray | None:
    """The run's closing streak of requests the target answered nothing to (a mask over ``requests``),
    or None when the run did not end on one (too few, or none refused outright). No span asked."""
    streak = _closing_streak(requests)
    return streak.after if streak is not None else None


def _closing_streak(requests: pd.DataFrame) -> _Streak | None:
    if not len(requests):
        return None
    start = numeric(requests, "start_wall")
    end = start + np.nan_to_num(numeric(requests, "e2e_ms")) / 1000.0
    ok = boolean(requests, "ok")
    kinds = np.array([k or "" for k in text(requests, "error_kind")], dtype=object)
    last_ok = float(np.nanmax(end[ok])) if ok.any() else None
    failed = ~ok & ~np.isin(kinds, list(NEUTRAL_KINDS)) & np.isfinite(start)
    if last_ok is not None:
        failed &= end > last_ok
    # the run's closing streak of refusals and cuts, by when each was sent: a server shutting down
    # gracefully answers 503 (or times out) first, then refuses; those answers came from it, the
    # streak after them is the outage. By send, not by end: a stream the server left hanging when it
    # went (llama-server on SIGTERM refuses new connections, and its open streams run into the
    # client's timeout) ends 30 s after the refusals that followed it, and by end it broke the streak
    # (a trial's killed server read as a capacity, exit 0)
    rows = np.flatnonzero(failed)
    rows = rows[np.lexsort((end[rows], start[rows]))]
    lost_kind = np.isin(kinds[rows], list(LOST_KINDS))
    streak = len(rows) - (int(np.flatnonzero(~lost_kind)[-1]) + 1 if (~lost_kind).any() else 0)
    after = np.zeros(len(kinds), dtype=bool)
    after[rows[len(rows) - streak:]] = True
    # at least a few requests answered with nothing at all: a proxy that cuts a live server's queued
    # streams (its read timeout) leaves disconnects after the response head while new connections are
    # still taken
    status = np.nan_to_num(numeric(requests, "status"))
    unanswered = sum(answered_nothing(kinds[i], int(status[i])) for i in np.flatnonzero(after))
    if after.sum() < MIN_REQUESTS or unanswered < MIN_REFUSED:
        return None
    return _Streak(after, end, kinds, last_ok)


def still_unanswered(after_load: Mapping[str, Any] | None) -> bool | None:
    """Did the request sent after the load (run.json's ``after_load``) get nothing either: refused, or
    closed before any response byte, as the streak's were? None: none was sent.

    A timeout is not "nothing": something took the connection and held it (a server still starting).
    """
    if not after_load:
        return None
    if after_load.get("answered", True):
        return False
    return answered_nothing(after_load.get("error_kind"), int(after_load.get("status") or 0))


def target_lost(requests: pd.DataFrame, levels: Sequence[LevelResult],
                after_load: Mapping[str, Any] | None = None) -> TargetLost | None:
    """The outage that ended the run, from the records (any order), or None when the target answered to the end.

    ``after_load``: run.json's record of the request sent once the load had ended, if one was.
    """
    streak = _closing_streak(requests)  # the columns read once, for the streak and for its words
    if streak is None:
        return None
    after, end, kinds, last_ok = streak.after, streak.end, streak.kinds, streak.last_ok
    confirmed = still_unanswered(after_load)
    # when it happened: the first of those failures (a stream cut at the death began before it, so its end)
    first = float(np.nanmin(end[after]))
    if float(np.nanmax(end[after])) - first < MIN_SPAN_S and not confirmed:
        return None
    by_start = sorted(levels, key=lambda lv: lv.start_wall)
    level = next((lv for lv in by_start if lv.start_wall <= first < max(lv.end_wall, lv.start_wall)), None)
    if level is None:  # between two levels: the next one measured nothing but the outage
        level = next((lv for lv in by_start if lv.start_wall > first), None)
    if level is None:  # after the last level's end (in its hold): the one last begun
        level = max((lv for lv in levels if lv.start_wall <= first), key=lambda lv: lv.start_wall, default=None)
    counts = pd.Series(kinds[after]).value_counts()
    return TargetLost(
        at_wall=first,
        level=level.label if level is not None else None,
        level_index=level.index if level is not None else None,
        seconds_into_level=first - level.start_wall if level is not None else None,
        requests=int(after.sum()),
        kinds={str(k): int(n) for k, n in counts.items()},
        last_success_wall=last_ok,
        confirmed_after_load=confirmed,
    )


def lost_capacity_message(levels: Sequence[LevelResult], lost: TargetLost) -> str | None:
    """The capacity sentence when the outage decides it: the outage first, then what held before it.

    None when every level that did not pass began before the outage (it came in the last level's
    hold, after a pass): every verdict was then made on a live server, and the warning says the
    rest. What held is the passing run of levels, lowest first, among those that began before the
    outage (a refine probe sent to a dead server fails, whatever its load) and, where the level it
    hit did not pass, below that level.
    """
    at = next((lv for lv in levels if lv.index == lost.level_index), None)
    after = [lv for lv in levels if lv.start_wall >= lost.at_wall and lv.status not in ("pass", "no_data")]
    if at is not None and at.status == "pass" and not after:
        return None
    hit = at is not None and at.status != "pass"
    live = sorted((lv for lv in levels if lv.status != "no_data" and lv.start_wall < lost.at_wall
                   and not (hit and (lv is at or lv.load >= at.load))), key=lambda lv: lv.load)
    held = None
    for lv in live:
        if lv.status != "pass":
            break
        held = lv
    return lost_message(lost, held.label if held is not None else None)


def lost_message(lost: TargetLost, held: str | None) -> str:
    """The capacity sentence of a run whose target went away: the outage first, then what held before it."""
    before = (f" Before it, the endpoint held {held} within the SLOs: a lower bound, since from there on "
              "the run measured the outage, not the load." if held else " No level passed before it.")
    text = lost.words()
    return f"{text[0].upper()}{text[1:]}.{before}"
