"""The server's view, joined to the client's levels on wall time. Pure functions.

Scraped samples (``server_metrics.parquet``) carry the wall time of their
scrape; a level's measured window is ``[window_start, end_wall)`` in the same
clock, so a sample belongs to the level whose window holds it. Per level and
known signal this gives p50/p95/max over the scrapes in the window.

It also reads the per-scrape ``up`` series for scrape health (per level, for
run.json and the summary) and cross-checks the two views: with N closed-loop
users, a server that reports far fewer requests in flight (running +
waiting) than N is not seeing all of them at once, so something between
client and server holds them (a proxy, a load balancer, a rate limiter, or
several replicas behind one URL), and the server's numbers describe one
replica's share, not the whole load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.fleet import FleetView, fleet_view, replicas_in
from loadtest.analysis.silent_replicas import client_in_flight
from loadtest.analysis.results import LevelResult
from loadtest.analysis.signals import KNOWN_SIGNALS, Signal, role_rank, signal_for
from loadtest.scrape.mixed import mixed_sources, mixed_warning, process_counts
from loadtest.scrape.store import UP, error_of

#: Below this share of the client's users in flight on the server, something queues in between.
IN_FLIGHT_SHORTFALL = 0.7
#: Above this share (plus one), the server also serves traffic that is not ours.
IN_FLIGHT_EXCESS = 1.3
#: Points per signal kept for the report's time plot.
MAX_PLOT_POINTS = 3000


@dataclass
class SignalStats:
    p50: float = math.nan
    p95: float = math.nan
    max: float = math.nan
    n: int = 0
    #: The time-weighted mean over the window (:func:`time_weighted_mean`): what an open loop's
    #: thresholds are set on (analysis/thresholds.py).
    mean: float = math.nan


@dataclass
class ScrapeHealth:
    scrapes: int = 0
    failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # message -> count

    def to_json(self) -> dict[str, Any]:
        return {"scrapes": self.scrapes, "failed": self.failed, "errors": dict(self.errors)}


@dataclass
class ServerView:
    """What the scraper saw, per level."""

    url: str | None
    signals: list[Signal]  # present in the scrapes, known first, in role order
    levels: dict[int, dict[str, SignalStats]]  # level index -> metric -> stats
    health: dict[int, ScrapeHealth]  # level index -> health over the whole level
    total: ScrapeHealth
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(repr=False, default_factory=dict)  # metric -> (wall, value)
    warnings: list[str] = field(default_factory=list)
    #: Several named replicas (target.metrics.urls or prometheus): per replica, per pod, imbalance.
    fleet: FleetView | None = None
    #: Sources whose scrapes came from several processes: replica id ('' = the single URL) -> evidence.
    mixed: dict[str, str] = field(default_factory=dict)
    #: Of those, how many processes answered (by ``process_start_time_seconds``), where that is known.
    processes: dict[str, int] = field(default_factory=dict)

    def stats(self, level_index: int, metric: str) -> SignalStats | None:
        return self.levels.get(level_index, {}).get(metric)

    def pod_stats(self, level_index: int, metric: str) -> SignalStats | None:
        """What one pod reports, as an autoscaler averages it: the mean over replicas (one server: its own)."""
        if self.fleet is None:
            return self.stats(level_index, metric)
        return self.fleet.pod_levels.get(level_index, {}).get(metric)

    @property
    def replica_count(self) -> int | None:
        """Replicas counted from the metrics: the named ones, 1 for one URL answered by one process, the
        processes answering one balancer's URL where their start times tell how many, else None."""
        if self.fleet is not None:
            return len(self.fleet.replicas)
        if self.mixed:
            return self.processes.get("") if set(self.mixed) == {""} else None
        if self.total.scrapes == self.total.failed:
            return None
        return 1

    @property
    def replica_source(self) -> str:
        """Where :attr:`replica_count` came from: ``metrics`` (sources named or one process) or ``processes``."""
        return "processes" if self.fleet is None and self.mixed else "metrics"

    def first_of_role(self, role: str) -> Signal | None:
        return next((s for s in self.signals if s.role == role), None)


def signals_present(samples: pd.DataFrame, extra: Sequence[str] = ()) -> list[Signal]:
    """Known signals found in the samples, plus the scenario's extra ones, best roles first."""
    names = set(samples["metric"].unique()) if len(samples) else set()
    found = [s for s in KNOWN_SIGNALS if s.metric in names]
    found += [signal_for(m) for m in extra if m in names and all(s.metric != m for s in found)]
    return sorted(found, key=lambda s: role_rank(s.role))


def signal_series(samples: pd.DataFrame, signal: Signal) -> tuple[np.ndarray, np.ndarray]:
    """One value per scrape: the signal's series combined by its aggregate (sum or max)."""
    rows = samples[samples["metric"] == signal.metric]
    if not len(rows):
        return np.array([]), np.array([])
    grouped = rows.groupby("wall", sort=True)["value"]
    combined = grouped.sum() if signal.aggregate == "sum" else grouped.max()
    return combined.index.to_numpy(dtype=float), combined.to_numpy(dtype=float)


def window_stats(wall: np.ndarray, value: np.ndarray, start: float, end: float) -> SignalStats:
    inside = (wall >= start) & (wall < end) & np.isfinite(value)
    v = value[inside]
    if not len(v):
        return SignalStats()
    return SignalStats(
        p50=float(np.percentile(v, 50)), p95=float(np.percentile(v, 95)), max=float(v.max()), n=int(len(v)),
        mean=time_weighted_mean(wall[inside], v, start, end),
    )


def time_weighted_mean(wall: np.ndarray, value: np.ndarray, start: float, end: float) -> float:
    """The gauge's average over ``[start, end)``, each scrape standing for the time nearest to it.

    A gauge is read at instants; the level's load is its average over time (Little's law's
    requests in flight). At a steady interval this is the scrapes' plain mean; when the scraper
    was late (it runs at nice 19, so a busy host delays it), a scrape after a long gap stands for
    that gap, not for one interval. Scrapes are the ones inside the window, in any order.
    """
    if not len(wall) or not end > start:
        return math.nan
    order = np.argsort(wall, kind="stable")
    t, v = wall[order], value[order]
    edges = np.concatenate(([start], (t[1:] + t[:-1]) / 2.0, [end]))
    weights = np.clip(np.diff(edges), 0.0, None)
    total = weights.sum()
    return float((weights * v).sum() / total) if total > 0 else float(v.mean())


def scrape_health(samples: pd.DataFrame, spans: Sequence[tuple[int, float, float]]) -> tuple[dict[int, ScrapeHealth], ScrapeHealth]:
    """Per level (index, start, end) and overall: scrapes made, failed, and why (from ``up``)."""
    up = samples[samples["metric"] == UP] if len(samples) else samples
    wall = up["wall"].to_numpy(dtype=float) if len(up) else np.array([])
    ok = up["value"].to_numpy(dtype=float) > 0 if len(up) else np.array([], dtype=bool)
    reasons = [error_of(lab) for lab in up["labels"]] if len(up) else []

    def health(mask: np.ndarray) -> ScrapeHealth:
        h = ScrapeHealth(scrapes=int(mask.sum()), failed=int((mask & ~ok).sum()))
        for i in np.flatnonzero(mask & ~ok):
            h.errors[reasons[i]] = h.errors.get(reasons[i], 0) + 1
        return h

    per_level = {index: health((wall >= start) & (wall < end)) for index, start, end in spans}
    return per_level, health(np.ones(len(wall), dtype=bool))


def _downsample(wall: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(wall) <= MAX_PLOT_POINTS:
        return wall, value
    step = math.ceil(len(wall) / MAX_PLOT_POINTS)
    return wall[::step], value[::step]


def server_view(
    samples: pd.DataFrame | None,
    levels: Sequence[LevelResult],
    settings: Mapping[str, Any] | None,
) -> ServerView | None:
    """Join the scraped samples to the levels; None when the run did not scrape.

    ``settings`` is run.json's ``server_metrics`` (url, extra signals); a run
    from before scraping existed has neither it nor samples.
    """
    settings = dict(settings or {})
    if samples is None:
        if not settings.get("enabled"):
            return None
        # Scraping was on but nothing reached the disk (the scraper could not start): say so.
        samples = pd.DataFrame({"wall": [], "metric": [], "labels": [], "value": [], "type": []})
    if "replica" not in samples:
        samples = samples.assign(replica="")
    url = settings.get("url")
    signals = signals_present(samples, settings.get("signals") or ())
    replicas = replicas_in(samples)
    fleet = None
    if replicas:
        running = next((s for s in signals if s.role == "running"), None)
        waiting = next((s for s in signals if s.role == "waiting"), None)
        fleet, series = fleet_view(samples, signals, replicas, levels, window_stats, running, waiting,
                                   _client_load)
        per_level = {lv.index: fleet.fleet_levels[lv.index] for lv in levels}
    else:
        series = {s.metric: signal_series(samples, s) for s in signals}
        per_level = {
            lv.index: {s.metric: window_stats(*series[s.metric], lv.window_start, lv.end_wall) for s in signals}
            for lv in levels
        }
    health, total = scrape_health(samples, [(lv.index, lv.start_wall, lv.end_wall) for lv in levels])
    view = ServerView(
        url=url, signals=signals, levels=per_level, health=health, total=total,
        series={m: _downsample(*xy) for m, xy in series.items()}, fleet=fleet, mixed=mixed_sources(samples),
        processes=process_counts(samples),
    )
    where = {"": url or "the metrics endpoint"}
    view.warnings = (
        health_warnings(view, settings, _told_apart(samples, levels, fleet))
        + [mixed_warning(where.get(rid, rid), evidence) for rid, evidence in view.mixed.items()]
        + crosscheck_warnings(view, levels)
    )
    return view


def _told_apart(samples: pd.DataFrame, levels: Sequence[LevelResult], fleet: FleetView | None) -> ScrapeHealth | None:
    """The scrape health without a silent replica's failed scrapes in the levels it was silent in (None:
    none was): those say more than "those moments have no server view", and the silent replica's
    own warning (:func:`loadtest.analysis.silent_replicas.silence_warnings`) says it."""
    if fleet is None or not any(r.silent for r in fleet.reporting.values()):
        return None
    drop = np.zeros(len(samples), dtype=bool)
    wall, replica = samples["wall"].to_numpy(dtype=float), samples["replica"].to_numpy()
    for lv in levels:
        silent = fleet.reporting[lv.index].silent
        drop |= np.isin(replica, silent) & (wall >= lv.window_start) & (wall < lv.end_wall)
    never = [rid for rid, s in fleet.scrapes.items() if s.never_answered]
    drop |= np.isin(replica, never)
    return scrape_health(samples[~drop], [])[1]


def health_warnings(view: ServerView, settings: Mapping[str, Any], told_apart: ScrapeHealth | None = None) -> list[str]:
    """One line per kind of scrape failure, and one when no known signal was found.

    ``told_apart``: the health without a silent replica's scrapes, which its own warning counts.
    """
    where = view.url or "the metrics endpoint"
    out = []
    total = view.total
    kinds: dict[str, list[tuple[str, int]]] = {}
    for message, count in (told_apart or view.total).errors.items():
        kinds.setdefault(message.split(" (")[0], []).append((message, count))
    for group in sorted(kinds.values(), key=lambda g: -sum(c for _, c in g)):
        count = sum(c for _, c in group)
        message = max(group, key=lambda mc: mc[1])[0]
        out.append(
            f"server metrics: {count} of {(told_apart or total).scrapes} scrapes of {where} failed ({message}); "
            + ("there is no server view for this run" if total.failed == total.scrapes else "those moments have no server view")
            + " (a failed scrape does not slow the load; it says nothing of the requests)."
        )
    if total.scrapes == 0:
        out.append(f"server metrics: no scrape of {where} was recorded.")
    elif total.failed < total.scrapes and not view.signals:
        out.append(
            f"server metrics: {where} answers, but with none of the known signals (vLLM, SGLang, TGI, llama.cpp); "
            "every sample is kept in server_metrics.parquet; name the ones that matter in target.metrics.signals."
        )
    extra = [m for m in settings.get("signals") or () if m not in {s.metric for s in view.signals}]
    if extra and total.failed < total.scrapes:
        out.append(f"server metrics: target.metrics.signals names {', '.join(extra)}, which the server never exported.")
    return out


def crosscheck_warnings(view: ServerView, levels: Sequence[LevelResult]) -> list[str]:
    """Client users against the server's requests in flight (running + waiting), per level."""
    running = view.first_of_role("running")
    if running is None:
        return []
    waiting = view.first_of_role("waiting")
    short, extra = [], []
    for lv in levels:
        run_stats = view.stats(lv.index, running.metric)
        if run_stats is None or run_stats.n == 0 or lv.concurrency < 2:
            continue
        if view.fleet is not None and view.fleet.reporting.get(lv.index) and view.fleet.reporting[lv.index].silent:
            continue  # a replica did not answer: its own warning holds the others' count against the load
        wait_stats = view.stats(lv.index, waiting.metric) if waiting else None
        in_flight = run_stats.p50 + (wait_stats.p50 if wait_stats and wait_stats.n else 0.0)
        per_request = _inputs_per_request(lv)
        if in_flight < IN_FLIGHT_SHORTFALL * lv.concurrency:
            # Where requests were refused (429), a user waiting to retry holds no request, so the
            # shortfall is explained, and the refusals are already counted (errors_by_kind.rate_limited).
            if not lv.errors_by_kind.get("rate_limited"):
                short.append(f"{lv.concurrency} users → {in_flight:g}")
        elif in_flight > IN_FLIGHT_EXCESS * lv.concurrency * per_request + 1:
            extra.append(f"{lv.concurrency} users → {in_flight:g}")
    name = running.metric + (f" + {waiting.metric}" if waiting else "")
    out = []
    # a URL that several processes answer is already warned about by name (mixed_warning): each scrape
    # reads one replica's share, and "something queues in between" would only guess at that again
    if short and not view.mixed:
        out.append(
            f"server metrics: the server reports far fewer requests in flight ({name}, median) than the client has "
            f"users ({'; '.join(short)}): something queues in between (a proxy, a load balancer, a rate limiter, "
            "or several replicas behind one URL, of which only one is scraped); the server's numbers are not the whole load."
        )
    if extra:
        out.append(
            f"server metrics: the server reports more requests in flight ({name}, median) than the client has users "
            f"({'; '.join(extra)}): it also serves other traffic, so its signals are not this test's alone."
        )
    return out


def _client_load(lv: LevelResult) -> float | None:
    """The client's requests in flight at a level, in the server's units (a batched kind's inputs)."""
    load = client_in_flight(lv)
    return None if load is None else load * _inputs_per_request(lv)


def _inputs_per_request(lv: LevelResult) -> float:
    """Inputs per request of a batched kind (embeddings inputs, rerank documents, score pairs), else 1.

    llama-server runs each input as a task of its own in a slot, and vLLM each as an engine
    request, so their in-flight gauges count up to users x inputs without any other traffic.
    """
    items, rps = getattr(lv, "items_per_s", None), getattr(lv, "requests_per_s", None)
    if items and rps and items > rps:
        return items / rps
    return 1.0
