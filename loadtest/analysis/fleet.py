"""A fleet's server view: each replica's signals, the fleet's sum, the per-pod mean, the imbalance. Pure.

Samples carry their replica (``server_metrics.parquet``'s ``replica`` column). With
several metric URLs, all replicas of one scrape round share one wall time; Prometheus's
query_range gives all series the same step times. So a *round* is one wall time, and a
fleet figure is only computed over rounds where every replica answered (a fleet sum
missing a replica would understate the load; those rounds are left out, and the scrape
health says why).

Per round and signal:

* **fleet** -- the signal's aggregate over replicas: the sum for counts (running, waiting
  requests, tokens), the maximum for fractions (KV cache usage: the fullest replica);
  ``levels[].server`` keeps this figure, as it did for one server;
* **per pod** -- the mean over replicas: what an HPA or KEDA averages, so thresholds are
  set on it;
* **imbalance** -- for running requests, the busiest replica over the mean. Its mean over
  a level's rounds (those with a request running) is ``levels[].imbalance``: 1.0 when the
  balancer spreads the requests evenly at every moment, 1.5 when on average the busiest
  replica carries half again its share. The mean, not the median: a round robin that puts
  two requests on one replica a fifth of the time is uneven, and a median would hide it.
  The busiest replica is the one whose latency breaks first, so the fleet's capacity is
  ``replicas x one replica's`` divided by about this factor.

A replica whose every scrape failed during a level (down, or its metrics unreachable) is
*silent* there: the level's figures are taken over the rounds in which every other replica
answered, and whether the others carried its load is read from their gauges
(:mod:`loadtest.analysis.silent_replicas`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.results import LevelResult
from loadtest.analysis.signals import Signal
from loadtest.analysis.silent_replicas import (
    LevelReporting, ReplicaScrapes, answered_frame, client_in_flight, replica_scrapes, serving_replicas, silent_in,
)

#: Above this imbalance at capacity, the report says the balancer, not the servers, set the capacity.
UNEVEN = 1.15


@dataclass
class Imbalance:
    ratio: float  # mean over the level's rounds of busiest / mean running requests
    busiest: float  # the busiest replica's running requests, averaged over the rounds
    mean: float  # the mean over replicas, averaged over the rounds
    n: int  # rounds with requests running


@dataclass
class FleetView:
    replicas: list[str]
    #: level index -> replica -> metric -> (p50, p95, max, n) as SignalStats
    replica_levels: dict[int, dict[str, dict]] = field(default_factory=dict)
    #: level index -> metric -> SignalStats of the per-pod mean
    pod_levels: dict[int, dict] = field(default_factory=dict)
    #: level index -> imbalance of running requests (None: no round ran a request)
    imbalance: dict[int, Imbalance | None] = field(default_factory=dict)
    #: level index -> metric -> SignalStats of the fleet figure (sum or max over the replicas that answered)
    fleet_levels: dict[int, dict] = field(default_factory=dict)
    #: level index -> which replicas answered there, and whether they carried the whole load
    reporting: dict[int, LevelReporting] = field(default_factory=dict)
    #: replica -> its scrapes over the run (answered, failed, silent levels)
    scrapes: dict[str, ReplicaScrapes] = field(default_factory=dict)
    #: metric -> replica -> (wall, value), for the report's time plot
    replica_series: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict, repr=False)


def replicas_in(samples: pd.DataFrame) -> list[str]:
    """The named replicas in the samples (the single default URL's samples have none)."""
    if not len(samples) or "replica" not in samples:
        return []
    return sorted({str(r) for r in samples["replica"].unique() if r})


def replica_frame(samples: pd.DataFrame, signal: Signal, replicas: Sequence[str]) -> pd.DataFrame:
    """One row per round, one column per replica: the replica's value (its series combined by the aggregate)."""
    rows = samples[(samples["metric"] == signal.metric) & samples["replica"].isin(list(replicas))]
    if not len(rows):
        return pd.DataFrame(columns=list(replicas), dtype=float)
    grouped = rows.groupby(["wall", "replica"], sort=True)["value"]
    combined = grouped.sum() if signal.aggregate == "sum" else grouped.max()
    return combined.unstack("replica").reindex(columns=list(replicas)).sort_index()


def complete_rounds(frame: pd.DataFrame) -> pd.DataFrame:
    """The rounds in which every replica reported."""
    return frame.dropna(how="any")


def fleet_series(frame: pd.DataFrame, signal: Signal) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wall, fleet figure, per-pod mean) over the complete rounds."""
    full = complete_rounds(frame)
    wall = full.index.to_numpy(dtype=float)
    if not len(full):
        return wall, np.array([]), np.array([])
    values = full.to_numpy(dtype=float)
    fleet = values.sum(axis=1) if signal.aggregate == "sum" else values.max(axis=1)
    return wall, fleet, values.mean(axis=1)


def imbalance_in(frame: pd.DataFrame, start: float, end: float) -> Imbalance | None:
    """Busiest over mean running requests across the complete rounds in ``[start, end)``."""
    full = complete_rounds(frame)
    wall = full.index.to_numpy(dtype=float)
    values = full.to_numpy(dtype=float)[(wall >= start) & (wall < end)]
    if values.shape[1] < 2 or not len(values):
        return None
    mean = values.mean(axis=1)
    busy = mean > 0
    if not busy.any():
        return None
    busiest = values.max(axis=1)
    return Imbalance(
        ratio=float(np.mean(busiest[busy] / mean[busy])),
        busiest=float(np.mean(busiest[busy])),
        mean=float(np.mean(mean[busy])),
        n=int(busy.sum()),
    )


def fleet_view(
    samples: pd.DataFrame,
    signals: Sequence[Signal],
    replicas: Sequence[str],
    levels: Sequence[LevelResult],
    window_stats,
    running: Signal | None,
    waiting: Signal | None = None,
    client_load: Callable[[LevelResult], float | None] = client_in_flight,
) -> tuple[FleetView, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per replica, per pod and imbalance per level; also the fleet series (metric -> (wall, value)).

    ``window_stats(wall, value, start, end)`` is the one-server summary (analysis.server);
    ``client_load(level)`` the requests in flight the client held there, in the server's units
    (what the live replicas' running + ``waiting`` are held against). Each level's figures leave
    out the replicas silent in it; the run's series (the report's plot) those that never answered.
    """
    view = FleetView(replicas=list(replicas))
    fleet: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    frames = {s.metric: replica_frame(samples, s, replicas) for s in signals}
    answered = answered_frame(samples, replicas)
    silent = {lv.index: silent_in(answered, lv.window_start, lv.end_wall) for lv in levels}
    heard = [r for r in replicas if r in answered and (answered[r] > 0).any()] or list(replicas)
    for signal in signals:
        wall, total, _ = fleet_series(frames[signal.metric][heard], signal)
        fleet[signal.metric] = (wall, total)
        if signal.role in ("running", "waiting"):
            frame = frames[signal.metric]
            view.replica_series[signal.metric] = {
                r: (frame.index.to_numpy(dtype=float)[ok], frame[r].to_numpy(dtype=float)[ok])
                for r in replicas
                for ok in [np.isfinite(frame[r].to_numpy(dtype=float))]
            }
    for lv in levels:
        start, end = lv.window_start, lv.end_wall
        live = [r for r in replicas if r not in silent[lv.index]] or list(replicas)
        totals, pods = {}, {}
        for signal in signals:
            wall, total, mean = fleet_series(_within(frames[signal.metric][live], start, end), signal)
            totals[signal.metric] = window_stats(wall, total, start, end)
            pods[signal.metric] = window_stats(wall, mean, start, end)
        view.fleet_levels[lv.index], view.pod_levels[lv.index] = totals, pods
        view.replica_levels[lv.index] = {
            r: {
                s.metric: window_stats(
                    frames[s.metric].index.to_numpy(dtype=float), frames[s.metric][r].to_numpy(dtype=float), start, end
                )
                for s in signals
            }
            for r in replicas
        }
        view.imbalance[lv.index] = imbalance_in(frames[running.metric][live], start, end) if running is not None else None
        view.reporting[lv.index] = _reporting(live, silent[lv.index], len(replicas), totals, running, waiting,
                                              client_load(lv))
        view.reporting[lv.index].failed = bool(lv.errors)
    view.scrapes = replica_scrapes(samples, answered, silent)
    return view, fleet


def _within(frame: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    wall = frame.index.to_numpy(dtype=float)
    return frame[(wall >= start) & (wall < end)]


def _reporting(live: list[str], silent: list[str], total: int, stats: dict, running: Signal | None,
               waiting: Signal | None, client: float | None) -> LevelReporting:
    """Which replicas answered at a level, their requests in flight, and how many carried its load."""
    if not silent:
        return LevelReporting(live=live, silent=[], client_in_flight=client)
    run = stats.get(running.metric) if running is not None else None
    in_flight = None
    if run is not None and run.n and math.isfinite(run.p50):
        wait = stats.get(waiting.metric) if waiting is not None else None
        in_flight = run.p50 + (wait.p50 if wait is not None and wait.n and math.isfinite(wait.p50) else 0.0)
    return LevelReporting(live=live, silent=silent, in_flight=in_flight, client_in_flight=client,
                          serving=serving_replicas(len(live), total, in_flight, client))


def imbalance_sentence(replicas: int, users: float | None, imb: Imbalance | None, unit: str = "users",
                       reporting: LevelReporting | None = None) -> str:
    """One plain sentence on how the balancer spread the load at the fleet's capacity.

    ``reporting`` says which replicas answered their metrics there: a sentence about the balance
    names the ones that did not, and never says that no replica reported when one did.
    """
    if replicas < 2 or users is None:
        return ""
    silent = reporting.silent if reporting is not None else []
    live = reporting.live if reporting is not None and silent else []
    if silent and len(live) < replicas:
        quiet = f"{_names(silent)} did not answer {'its' if len(silent) == 1 else 'their'} metrics"
        if reporting.serving is not None and reporting.in_flight is not None:
            return (
                f"{replicas} replicas; at {users:g} {unit} {quiet}, and the {_count(len(live))} that did ran "
                f"{reporting.in_flight:g} requests, the whole load: this level ran on {_count(len(live))}, "
                "so it tells nothing of how the balancer spreads the fleet's load."
            )
        if imb is None:
            alone = (f"{live[0]}, the one that did, cannot show a balance alone" if len(live) == 1 else
                     f"the {len(live)} that did reported no running requests")
            return f"{replicas} replicas; at {users:g} {unit} {quiet}, and {alone}, so the balance is unknown."
        return (
            f"{replicas} replicas; at {users:g} {unit} {quiet}; among the {len(live)} that did, the busiest ran "
            f"{imb.busiest:.3g} requests while the mean was {imb.mean:.3g} (imbalance {imb.ratio:.2f})."
        )
    if imb is None:
        return f"{replicas} replicas; at {users:g} {unit} no replica reported running requests, so the balance is unknown."
    head = (
        f"{replicas} replicas; at {users:g} {unit} the busiest ran {imb.busiest:.3g} requests while the mean was "
        f"{imb.mean:.3g} (imbalance {imb.ratio:.2f})"
    )
    if imb.ratio >= UNEVEN:
        return head + ": the balancer, not the servers, set the capacity (it is below replicas x one replica's)."
    return head + ": the balancer spread the load evenly, so each replica carried its share."


def _names(ids: Sequence[str]) -> str:
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + " and " + ids[-1]


def _count(n: int) -> str:
    return f"{n} replica" + ("" if n == 1 else "s")


def resolve_replicas(declared: int | None, counted: int | None,
                     counted_from: str = "metrics") -> tuple[int | None, str | None, str | None]:
    """(replicas, where the number came from, a warning when the two disagree or the count is a guess).

    ``declared`` is ``target.replicas``; ``counted`` the replicas seen in the metrics (1 for a
    single URL answered by one process; the processes answering a balancer's URL, ``counted_from``
    ``processes``; None when it is unknown, and with ``counted_from`` ``processes`` a balancer's URL
    whose processes could not be counted).
    """
    if declared:
        warning = None
        if counted is not None and counted != declared:
            warning = (
                f"target.replicas declares {declared} replicas, but the server metrics come from {counted}: "
                f"the per-replica figures use the declared {declared}."
            )
        return declared, "declared", warning
    if counted is not None and counted_from == "processes":
        return counted, "processes", (
            f"server metrics: {counted} processes answered the one metrics URL (their start times), so the "
            f"capacity is taken as {counted} replicas' and the per-replica figures, the cost and the forecast "
            "as one of them; declare target.replicas if the balancer did not reach every replica"
        )
    if counted is not None:
        return counted, "metrics", None
    if counted_from == "processes":
        return None, None, (
            "server metrics: the replicas behind the metrics URL are unknown, so the per-replica figures, "
            "the cost and the forecast take the whole capacity as one replica's; declare target.replicas"
        )
    return None, None, None
