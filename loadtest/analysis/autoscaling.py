"""From measured capacity to scale-out thresholds: a pure function of the levels and the server's view.

The idea: the SLO holds up to the capacity level and breaks at the first
failing one. Whatever the server reports at those two levels is what
"full" looks like in its own units. A trigger on a signal should fire
*before* full, early enough that a new replica is serving by the time load
reaches capacity. That margin is the **headroom** ``h``:

    threshold = value at capacity × (1 − h)

``h`` is ``--headroom`` (default 20%), or it is derived from how long a new
replica takes to start serving (``--scale-up-s``, from the metric crossing the
threshold to the new pod taking traffic: autoscaler polling + scheduling +
image pull + model load) and an assumed traffic growth rate ``g`` per minute
(``--traffic-growth``, default 10%/min, compounding). During the scale-up the
load grows by ``(1 + g) ^ (scale_up_s / 60)``; a threshold at
``capacity / that`` is just reached at capacity when the replica arrives:

    h = 1 − (1 + g) ^ (−scale_up_s / 60)

(e.g. 180 s at 10%/min: load × 1.33, h = 25%). With both flags the larger
headroom wins.

Per signal role:

* running requests (and any count that follows concurrency): ``value at capacity × (1 − h)``, where
  the value is the scrapes' median in closed loop, their time average in open loop and trace replay,
  and with fewer than 8 scrapes there the client's time average of requests in flight, or no
  threshold at all (analysis/thresholds.py says which, and why);
* waiting requests: when nothing typically waits while the SLO holds (median 0 at every level up
  to capacity; an arrival waits for the next engine step, so a scrape may catch one in passing)
  but requests wait at the first failing level, any waiting is the sign of overload: threshold 1 per replica (it fires at the edge,
  so it carries no headroom of its own: pair it with the running threshold);
  otherwise ``value at capacity × (1 − h)``, at least 1;
* KV cache usage: ``value at capacity × (1 − h)`` (a fraction).

The **best** signal is the first, in the order running requests, waiting
requests, KV cache, of those that *rise* from the capacity level to the
first failing one: a higher median at the first failing level (waiting
requests only count when none typically wait at any level up to capacity:
otherwise their count is arrival noise, not overload). With one user
between the two levels the distributions overlap; the medians still move
with the load, which is what a trigger needs. The order is by directness: running requests track the load a
replica carries, waiting requests show that it carries more than it can
batch, cache usage depends on prompt and output lengths. So a decode-bound
server scales on running requests, and a server whose running requests are
pinned at a batch limit (they no longer separate) scales on waiting ones.
When nothing separates (no level failed), the most direct signal is used, except a
running count **pinned at the server's batch limit** at capacity (requests waited
there, and fewer ran than the users per replica by a sequence or more): it reads
the same from the batch limit up, so its threshold (4 slots, 20% headroom: 3.2)
would fire at a few users where the capacity is 13 (a llama-server trial). The
waiting count, which grows with the load above the limit, is the trigger then, and
the running threshold is not offered beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from loadtest.analysis.fleet import Imbalance, imbalance_sentence
from loadtest.analysis.results import Capacity, LevelResult
from loadtest.analysis.server import ServerView, SignalStats
from loadtest.analysis.signals import Signal, role_rank
from loadtest.analysis.autoscaling_words import paragraph
from loadtest.analysis.thresholds import NOTHING_WAITS, any_waiting_rule, threshold_basis, too_few_scrapes
from loadtest.analysis.thresholds import signal_threshold as _threshold

DEFAULT_HEADROOM = 0.20
DEFAULT_TRAFFIC_GROWTH = 0.10  # per minute


@dataclass(frozen=True)
class AutoscalingOptions:
    headroom: float | None = None  # --headroom, a fraction; None: default or derived
    scale_up_s: float | None = None  # --scale-up-s
    traffic_growth_per_min: float = DEFAULT_TRAFFIC_GROWTH  # --traffic-growth, a fraction

    @classmethod
    def from_dict(cls, data: dict | None) -> "AutoscalingOptions":
        data = dict(data or {})
        return cls(
            headroom=data.get("headroom"),
            scale_up_s=data.get("scale_up_s"),
            traffic_growth_per_min=data.get("traffic_growth_per_min") or DEFAULT_TRAFFIC_GROWTH,
        )

    def to_dict(self) -> dict:
        return {"headroom": self.headroom, "scale_up_s": self.scale_up_s, "traffic_growth_per_min": self.traffic_growth_per_min}

    def with_overrides(self, headroom: float | None, scale_up_s: float | None, growth: float | None) -> "AutoscalingOptions":
        return AutoscalingOptions(
            headroom=self.headroom if headroom is None else headroom,
            scale_up_s=self.scale_up_s if scale_up_s is None else scale_up_s,
            traffic_growth_per_min=self.traffic_growth_per_min if growth is None else growth,
        )


def derived_headroom(scale_up_s: float, growth_per_min: float) -> float:
    """The share of capacity that traffic growing at ``growth_per_min`` adds during ``scale_up_s``."""
    return 1.0 - (1.0 + growth_per_min) ** (-scale_up_s / 60.0)


def resolve_headroom(options: AutoscalingOptions) -> tuple[float, str]:
    """The headroom to use, and one sentence saying where it came from.

    The sentence goes inside brackets ("Headroom 30% (…)"), so it has none of its own; with both
    flags it says what each gave, the larger one first (it was a nested "(larger than the one
    derived from --scale-up-s)" that never said how large that one was).
    """
    if options.scale_up_s is None:
        if options.headroom is not None:
            return options.headroom, f"--headroom {options.headroom:.0%}"
        return DEFAULT_HEADROOM, f"the default headroom of {DEFAULT_HEADROOM:.0%}"
    derived = derived_headroom(options.scale_up_s, options.traffic_growth_per_min)
    growth = (1 + options.traffic_growth_per_min) ** (options.scale_up_s / 60)
    if options.headroom is not None and options.headroom >= derived:
        return options.headroom, (
            f"--headroom {options.headroom:.0%}, larger than the {derived:.1%} derived from --scale-up-s "
            f"{options.scale_up_s:g}: traffic growing {options.traffic_growth_per_min:.0%}/min grows ×{growth:.2f} "
            "while a new replica starts"
        )
    how = (
        f"derived from --scale-up-s {options.scale_up_s:g}: a new replica takes {options.scale_up_s:g} s to serve, "
        f"and traffic growing {options.traffic_growth_per_min:.0%}/min grows ×{growth:.2f} meanwhile, so the trigger "
        f"must fire at 1/{growth:.2f} = {1 - derived:.0%} of capacity"
    )
    if options.headroom is not None:
        how += f"; larger than --headroom {options.headroom:.0%}"
    return derived, how


@dataclass
class SignalRecommendation:
    metric: str
    server: str
    role: str
    at_capacity: SignalStats
    at_first_failing: SignalStats | None
    threshold: float | None
    why: str
    separates: bool  # its median rises from the capacity level to the first failing one
    separation: float  # (failing p50 − capacity p50) / failing p50; 0 when it does not rise
    #: What the threshold is set on (analysis/thresholds.py): "p50", "time_mean", "client_in_flight",
    #: "rule" (waiting's "any request waits", no value), or None where nothing at capacity was measured
    #: well enough; and that value (before headroom).
    basis: str | None = None
    basis_value: float | None = None
    #: A running count at the server's batch limit at capacity (module doc): not a trigger.
    pinned: bool = False

    @property
    def placeholder(self) -> bool:
        """Scraped at capacity, but too few times for a threshold: the manifests leave it to fill in.

        Not a signal that was measured and read 0 there (no threshold: "> 0" fires on any traffic,
        and more scrapes would not change it)."""
        return self.threshold is None and self.at_capacity.n > 0 and self.basis_value is None


@dataclass
class Autoscaling:
    headroom: float
    headroom_source: str
    options: AutoscalingOptions
    capacity: int | None
    first_failing: int | None
    target_concurrency_per_replica: int | None
    signals: list[SignalRecommendation] = field(default_factory=list)
    best: str | None = None  # metric of the recommended signal
    paragraph: str = ""
    #: Open loop: the rate to aim for per replica (capacity.rate_rps × (1 − headroom)); None in closed loop.
    target_rate_rps_per_replica: float | None = None
    sustainable_rate_rps: float | None = None  # open loop: what a growing queue at capacity says (caps the target)
    #: Replicas the capacity was measured on (declared or counted); thresholds are per pod.
    replicas: int | None = None
    replicas_source: str | None = None  # "declared" (target.replicas), "metrics" (counted) or "processes"
    #: How unevenly the balancer spread running requests at the capacity level (several replicas).
    imbalance_at_capacity: Imbalance | None = None
    #: The plain sentence on the balancer at capacity ("" for one replica).
    fleet_sentence: str = ""

    def best_signal(self) -> SignalRecommendation | None:
        return next((s for s in self.signals if s.metric == self.best), None)

    def mean_concurrency_per_replica(self) -> float | None:
        """Users per replica on average, capacity / replicas × (1 − headroom): what an autoscaler's
        average, the running trigger and the cost forecast work with (``target_concurrency_per_replica``
        is its whole number, rounded down, for users pinned to a replica)."""
        if not self.capacity:
            return None
        return round(self.capacity / max(1, self.replicas or 1) * (1 - self.headroom), 2)


def level_at(levels: Sequence[LevelResult], concurrency: int | None, rate: float | None = None) -> LevelResult | None:
    """The level run at that concurrency, or open loop at that rate (the last one, if it ran twice)."""
    if concurrency is None and rate is None:
        return None
    same = [lv for lv in levels if lv.status != "no_data"
            and (lv.rate_rps == rate if rate is not None else lv.concurrency == concurrency)]
    return max(same, key=lambda lv: lv.index) if same else None


def _typical_below(server: ServerView, levels: Sequence[LevelResult], capacity: float, metric: str) -> float:
    """The largest median of ``metric`` over the levels up to the capacity (what is normal while the SLO holds)."""
    medians = [
        st.p50 for lv in levels
        if lv.load <= capacity and (st := server.pod_stats(lv.index, metric)) is not None and st.n
    ]
    return max(medians, default=math.nan)


def _in_flight_per_replica(level: LevelResult, share: int) -> float | None:
    """The client's time average of requests in flight at ``level``, per replica (open loop only)."""
    in_flight = (level.open_loop or {}).get("mean_in_flight")
    return None if in_flight is None else in_flight / share


def _mark_pinned(signals: Sequence[SignalRecommendation], users: float | None) -> None:
    """Mark the running counts pinned at the batch limit at capacity (module doc), and say so in their ``why``:
    requests waited there (the waiting count's median 1 or more) and the running median is a sequence or more
    below ``users`` (the requests in flight per replica at capacity)."""
    waiting = next((s for s in signals if s.role == "waiting" and s.at_capacity.n), None)
    if waiting is None or not waiting.at_capacity.p50 >= 1 or users is None:
        return
    for s in signals:
        if s.role == "running" and s.at_capacity.n and s.at_capacity.p50 <= users - 1:
            s.pinned = True
            s.why += (f" It is pinned at the server's batch limit here ({s.at_capacity.p50:g} running with "
                      f"{waiting.at_capacity.p50:g} waiting at capacity): it reads the same from that many users up, "
                      f"so it cannot place a trigger below the capacity; {waiting.metric} can.")
            waiting.why += (" Running requests are pinned at the batch limit, so this is the count that grows with "
                            "the load: the trigger.")


def _waiting_at(server: ServerView, level: LevelResult) -> SignalStats | None:
    waiting = server.first_of_role("waiting")
    return server.pod_stats(level.index, waiting.metric) if waiting is not None else None


def _separation(signal: Signal, cap: SignalStats, fail: SignalStats | None, typical: float) -> float:
    if signal.role == "waiting" and not typical < NOTHING_WAITS:
        # Requests already queue at capacity (arrivals waiting for the next step): how many
        # wait is noise around the limit, not a clean sign of overload.
        return 0.0
    if fail is None or not fail.n or not cap.n or fail.p50 <= 0 or not fail.p50 > cap.p50:
        return 0.0
    return (fail.p50 - cap.p50) / fail.p50


def recommend(
    levels: Sequence[LevelResult],
    capacity: Capacity,
    server: ServerView | None,
    options: AutoscalingOptions = AutoscalingOptions(),
    replicas: int | None = None,
    replicas_source: str | None = None,
    sustainable_rps: float | None = None,
) -> Autoscaling:
    """Thresholds per known signal and a target concurrency per replica, from the capacity result.

    With several ``replicas`` the capacity is the fleet's: the targets are its share per
    replica, and each signal's threshold is set on the per-pod mean (what an HPA or KEDA
    averages). An uneven balancer makes the fleet fail when its busiest replica is full,
    while the mean is still below its share; the per-pod value measured at the fleet's
    capacity is that lower mean, so the thresholds come out lower by the same factor.
    """
    headroom, source = resolve_headroom(options)
    share = max(1, replicas or 1)
    result = Autoscaling(
        headroom=headroom, headroom_source=source, options=options,
        capacity=capacity.concurrency, first_failing=capacity.first_failing,
        target_concurrency_per_replica=(
            max(1, math.floor(capacity.concurrency / share * (1 - headroom))) if capacity.concurrency else None
        ),
        replicas=replicas, replicas_source=replicas_source,
    )
    if capacity.rate_rps is not None:
        # never above the rate the run measured the server to sustain (sustained.py), nor above what the
        # capacity level's window received (a short window's random arrivals: analysis/offered.py)
        result.sustainable_rate_rps = sustainable_rps
        held = min(capacity.rate_rps, sustainable_rps or math.inf, capacity.sent_rate_rps or math.inf)
        result.target_rate_rps_per_replica = round(held / share * (1 - headroom), 3)
    cap_level = level_at(levels, capacity.concurrency, capacity.rate_rps)
    fail_level = level_at(levels, capacity.first_failing, capacity.first_failing_rate_rps)
    if server is not None and server.fleet is not None and cap_level is not None:
        result.imbalance_at_capacity = server.fleet.imbalance.get(cap_level.index)
        result.fleet_sentence = imbalance_sentence(
            len(server.fleet.replicas), cap_level.load, result.imbalance_at_capacity,
            "req/s" if capacity.rate_rps is not None else "users", server.fleet.reporting.get(cap_level.index),
        )
    if server is not None and cap_level is not None:
        for signal in server.signals:
            cap = server.pod_stats(cap_level.index, signal.metric) or SignalStats()
            fail = server.pod_stats(fail_level.index, signal.metric) if fail_level is not None else None
            typical = _typical_below(server, levels, cap_level.load, signal.metric)
            basis = threshold_basis(signal, cap, capacity.rate_rps is not None,
                                    _in_flight_per_replica(cap_level, share), _waiting_at(server, cap_level))
            threshold, why = _threshold(signal, cap, fail, headroom, typical, basis)
            sep = 0.0 if too_few_scrapes(cap, fail) else _separation(signal, cap, fail, typical)
            kind, value = ("rule", None) if any_waiting_rule(signal, typical) and threshold else (basis.kind, basis.value)
            result.signals.append(SignalRecommendation(
                signal.metric, signal.server, signal.role, cap, fail, threshold, why, sep > 0, sep, kind, value))
        _mark_pinned(result.signals, cap_level.load / share if capacity.rate_rps is None
                     else _in_flight_per_replica(cap_level, share))
        # a placeholder's signal stays the trigger its role makes it: its threshold is to fill in, not another signal's
        usable = [s for s in result.signals if s.threshold is not None or s.placeholder]
        separating = [s for s in usable if s.separates]
        candidates = separating or usable
        candidates = [s for s in candidates if not s.pinned] or candidates
        if usable:
            result.best = min(candidates, key=lambda s: role_rank(s.role)).metric
    result.paragraph = paragraph(result, capacity, server)
    return result
