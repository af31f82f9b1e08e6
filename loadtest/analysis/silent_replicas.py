"""Replicas of a fleet whose metrics did not answer: which, at which levels, and who carried the load. Pure.

Why this exists: a fleet's figures per replica divide the load by its replicas. When one of
them is down (killed, crash-looping, its node gone), its ``/metrics`` refuses every scrape and
the balancer sends its share to the others, so a run against "2 replicas" measured one. The
failed scrapes alone read as a monitoring hiccup ("those moments have no server view"), and a
fleet figure taken only over the rounds in which *every* replica answered has no round left:
the replica that did answer, whose gauge held the whole load, was not read at all ("no replica
reported running requests").

So, per level (its measured window):

* **silent**: the replicas scraped in the window whose every scrape failed; the others are
  **live**, and the level's fleet figures come from the rounds in which every live replica
  answered (a live replica's passing failure still leaves its round out, as before);
* **serving**: whether the live replicas held the whole load: their running (+ waiting)
  requests, the median of their sum, against the client's requests in flight. An even split
  would give them ``live / all`` of it; at or past the midpoint between that share and all of
  it, the silent replicas ran none, and the level ran on ``len(live)`` replicas. Below it, a
  silent replica seems to have served with its metrics unreachable, and the split stays as
  declared. Without a running gauge, with fewer requests in flight than replicas (an even
  share of under one request tells nothing), or below the midpoint at a level where requests
  failed (a refused request holds no slot: one replica's full slots and a refusal read like a
  share), it is unknown and nothing is changed, but no sentence claims an even split there.

What follows from it and what is only warned about: the split per replica of what a level
*ran* (its batch per replica, "at 32 users (32 a replica ...)", the decode fit's points) follows
the live replicas' own gauges, which measured it. The planning figures (``capacity.per_replica``,
the autoscaling target per replica, the cost's replicas and the forecast) keep dividing by the
declared (or listed) replicas, the user's statement of the fleet, since a replica may be down
only for this run; :func:`silence_warnings` says so, names the URL, and gives the factor by
which those figures would change if the replica stays gone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pandas as pd

from loadtest.redact import public_url
from loadtest.scrape.sources import replica_ids
from loadtest.scrape.store import UP, error_of


@dataclass
class LevelReporting:
    """Which replicas' metrics answered during one level, and what the ones that did say of its load."""

    live: list[str]
    silent: list[str]
    #: The live replicas' running (+ waiting) requests: the median over the level of their sum.
    in_flight: float | None = None
    #: The client's requests in flight: the users (closed loop), the mean in flight (a rate).
    client_in_flight: float | None = None
    #: The replicas the level's load ran on where the gauges show fewer than listed did; else None.
    serving: int | None = None
    #: Requests failed there (refused, timed out): they held no slot, so a shortfall of the live
    #: replicas' count below the users does not show that a silent replica served.
    failed: bool = False


@dataclass
class ReplicaScrapes:
    """One replica's scrapes over the run: how many, how many answered, and the most common failure."""

    scrapes: int = 0
    answered: int = 0
    error: str = ""
    #: Level indices at which every scrape of it failed.
    silent_levels: list[int] = field(default_factory=list)

    @property
    def never_answered(self) -> bool:
        return self.scrapes > 0 and self.answered == 0


def answered_frame(samples: pd.DataFrame, replicas: Sequence[str]) -> pd.DataFrame:
    """One row per scrape round, one column per replica: 1.0 answered, 0.0 failed, NaN not scraped."""
    up = samples[(samples["metric"] == UP) & samples["replica"].isin(list(replicas))]
    if not len(up):
        return pd.DataFrame(columns=list(replicas), dtype=float)
    answered = (up["value"].astype(float) > 0).astype(float)
    frame = answered.groupby([up["wall"], up["replica"]]).max().unstack("replica")
    return frame.reindex(columns=list(replicas)).sort_index()


def silent_in(answered: pd.DataFrame, start: float, end: float) -> list[str]:
    """The replicas scraped in ``[start, end)`` whose every scrape there failed."""
    wall = answered.index.to_numpy(dtype=float)
    window = answered[(wall >= start) & (wall < end)]
    return [str(r) for r in answered.columns if window[r].notna().any() and not (window[r] > 0).any()]


def client_in_flight(level: Any) -> float | None:
    """The client's requests in flight at a level: its users, or a rate level's mean in flight."""
    if getattr(level, "rate_rps", None) is not None:
        value = (getattr(level, "open_loop", None) or {}).get("mean_in_flight")
        return float(value) if value is not None and math.isfinite(float(value)) else None
    return float(level.concurrency)


def serving_replicas(live: int, total: int, in_flight: float | None, client: float | None) -> int | None:
    """``live`` where the live replicas' gauges held the whole load (module doc), else None."""
    if not 0 < live < total or in_flight is None or client is None or not math.isfinite(in_flight):
        return None
    if client < total:  # an even share of under one request each: a single replica holding it all says nothing
        return None
    share = live / total
    return live if in_flight >= client * (share + 1) / 2 else None


def replica_scrapes(samples: pd.DataFrame, answered: pd.DataFrame,
                    silent_levels: Mapping[int, Sequence[str]]) -> dict[str, ReplicaScrapes]:
    """Per replica: scrapes, answered, its most common failure, and the levels at which it was silent."""
    out: dict[str, ReplicaScrapes] = {}
    up = samples[samples["metric"] == UP]
    for rid in answered.columns:
        column = answered[rid].dropna()
        errors = up.loc[(up["replica"] == rid) & (up["value"] <= 0), "labels"]
        out[str(rid)] = ReplicaScrapes(
            scrapes=int(len(column)), answered=int((column > 0).sum()),
            error=str(errors.map(error_of).mode().iloc[0]) if len(errors) else "",
            silent_levels=sorted(i for i, ids in silent_levels.items() if rid in ids),
        )
    return out



def silence_warnings(
    reporting: Mapping[int, LevelReporting],
    scrapes: Mapping[str, ReplicaScrapes],
    levels: Sequence[Any],
    urls: Mapping[str, str],
    replicas: int | None,
    replicas_source: str | None,
    capacity_level: Any = None,
) -> list[str]:
    """One warning naming each silent replica, then what its silence does to the figures (module doc).

    ``urls`` maps a replica's id to its metrics URL (none from Prometheus); ``replicas`` and
    ``replicas_source`` are what the per-replica figures divide by (target.replicas, or counted);
    ``capacity_level`` is the level at the capacity, whose split the planning figures take.
    """
    quiet = {rid: s for rid, s in scrapes.items() if s.silent_levels}
    if not quiet:
        return []
    by_index = {lv.index: lv for lv in levels}
    listed = len(scrapes)
    out = [_silent_line(rid, s, urls.get(rid), [by_index[i] for i in s.silent_levels if i in by_index], levels)
           for rid, s in sorted(quiet.items())]
    hit = [lv for lv in sorted(levels, key=lambda lv: lv.load) if reporting.get(lv.index) and reporting[lv.index].silent]
    carried = [lv for lv in hit if reporting[lv.index].serving is not None]
    shared = [lv for lv in hit if lv not in carried and shared_load(reporting[lv.index], listed)]
    unknown = [lv for lv in hit if lv not in carried and lv not in shared]
    divide = _divisor(replicas, replicas_source)
    if carried:
        serving = reporting[carried[0].index].serving
        held = ", ".join(f"{_g(reporting[lv.index].in_flight)} at {_name(lv)}" for lv in carried)
        out.append(
            f"server metrics: at {_names(carried)} the replicas that answered ran the whole load (running + waiting "
            f"requests, median: {held}), so {'that level' if len(carried) == 1 else 'those levels'} ran on fewer "
            f"replicas than the {listed} listed: the batch per replica, the decode fit and why the capacity stops "
            "there count only the replicas that answered."
            + (f" {_planning(capacity_level, reporting[capacity_level.index].serving, divide, replicas)}"
               if divide and capacity_level is not None and capacity_level in carried else
               f" The per-replica figures, the cost and the forecast divide by {divide}." if divide else "")
            + f" Check {'that replica' if len(quiet) == 1 else 'those replicas'} and run again, or declare "
            f"target.replicas: {serving} and list only the metrics URLs that serve."
        )
    if shared:
        held = ", ".join(f"{_g(reporting[lv.index].in_flight)} of {_g(reporting[lv.index].client_in_flight)} "
                         f"at {_name(lv)}" for lv in shared)
        out.append(
            f"server metrics: at {_names(shared)} the replicas that answered ran about their share of the requests "
            f"in flight ({held}), so a replica whose metrics did not answer seems to have served all the same: "
            "levels[].server counts only the replicas that answered"
            + (f"; the per-replica figures, the cost and the forecast divide by {divide}." if divide else ".")
        )
    if unknown:
        out.append(
            f"server metrics: at {_names(unknown)} whether a replica whose metrics did not answer served cannot be "
            "told (no running-requests gauge from the others, fewer requests in flight than replicas, or requests "
            "failed there, which hold no slot)"
            + (f", so the per-replica figures, the cost and the forecast divide by {divide} as if it did." if divide
               else ".")
        )
    return out


def _silent_line(rid: str, s: ReplicaScrapes, url: str | None, silent: list[Any], levels: Sequence[Any]) -> str:
    who = f"replica {rid}" + (f" ({url})" if url and url != rid else "")
    why = f"; {s.error}" if s.error else ""
    if s.never_answered:
        what = f"never answered its metrics ({s.scrapes} scrapes, none answered{why})"
    else:
        order = sorted(levels, key=lambda lv: lv.index)
        tail = order[order.index(silent[0]):] if silent and silent[0] in order else []
        stopped = bool(tail) and [lv.index for lv in tail] == [lv.index for lv in silent]
        when = f"stopped answering its metrics at {_name(silent[0])}" if stopped else \
            f"did not answer its metrics at {_names(silent)}"
        what = f"{when} ({s.answered} of {s.scrapes} scrapes answered{why})"
    return (f"server metrics: {who} {what}: that replica may be down, and the balancer may have sent its "
            "requests to the others.")


def shared_load(rep: LevelReporting, listed: int) -> bool:
    """Did the live replicas hold about their even share at a level with a silent one (module doc)?"""
    return (rep.in_flight is not None and rep.client_in_flight is not None and rep.client_in_flight >= listed
            and not rep.failed)


def _planning(level: Any, serving: int, divide: str, replicas: int) -> str:
    """What the planning figures take at the capacity level, against what the replicas that served held."""
    load, unit = (level.rate_rps, "req/s") if level.rate_rps is not None else (float(level.concurrency), "users")
    each = f"all {load:g} {unit}" if serving == 1 else f"{load / serving:g} {unit} each"
    return (
        f"capacity.per_replica, the autoscaling target per replica, the cost and the forecast's replicas still divide "
        f"by {divide}: at the capacity ({load:g} {unit}) {serving} replica{'s' if serving > 1 else ''} held {each}, "
        f"not {load / replicas:g} a replica, so while the replica is down they credit a replica with {serving}/{replicas} "
        f"of its capacity, and the cost and the forecast count {replicas / serving:.3g}× the replicas that served."
    )


def _divisor(replicas: int | None, source: str | None) -> str:
    if not replicas:
        return ""
    if source == "declared":
        return f"the declared {replicas} (target.replicas)"
    return f"the {replicas} replicas counted in the metrics"


def _name(level: Any) -> str:
    return f"{level.rate_rps:g} req/s" if level.rate_rps is not None else f"{level.concurrency} users"


def _names(levels: Sequence[Any]) -> str:
    names = [_name(lv) for lv in levels]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _g(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def metrics_urls(settings: Mapping[str, Any] | None) -> dict[str, str]:
    """Replica id -> its metrics URL, from run.json's ``server_metrics.urls`` (none from Prometheus)."""
    urls = [str(u) for u in (settings or {}).get("urls") or []]
    return dict(zip(replica_ids(urls), (public_url(u) for u in urls)))
