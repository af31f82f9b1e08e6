"""What limits each level: the decode fit and roofline reading of an analyzed closed-loop run.

Why here: an ordinary ``run`` already measures ITL against concurrency, which
is the decode curve. So the same fit ``loadtest profile`` uses
(:mod:`decode_fit`) is applied to its levels, and each level is named by its
bound (:mod:`roofline`): ``memory``/``compute``/``overhead`` from the floors
when the scenario declares ``hardware:`` and ``model:``, else from the fit
alone (``compute`` past the knee, and everywhere on a curve whose step grows at
least as fast as its batch; below the knee ``memory_or_overhead``: without floors
an overhead-bound server cannot be told from a memory-bound one, and ``basis``
says which reading was used).

The batch size of a level (:func:`running_sequences`) is what most of its decode steps
ran with: the client's own requests in the server's batch (the median over the level), or the
server's running gauge where it reads a sequence more (another client's load). Pure functions over
:class:`~loadtest.analysis.results.Analysis`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from loadtest.analysis.decode_fit import DecodeFit, DecodePoint, fit_decode
from loadtest.analysis.roofline import Ceilings, ModelSize, fit_bound, read_decode


@dataclass
class LevelBound:
    concurrency: int
    sequences: float
    bound: str
    basis: str  # "roofline" | "fit"
    context_tokens: float
    reading: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"bound": self.bound, "basis": self.basis, "sequences": self.sequences, "context_tokens": self.context_tokens}
        if self.reading:
            out.update(self.reading)
        return out


def running_sequences(analysis: Any, level: Any) -> float:
    """The level's batch: what its decode steps ran with, at least one sequence.

    This client's own requests in the batch, the median over the level's window
    (:func:`client_in_batch`; for a fleet, per replica), unless the server's running gauge
    (p50 over the level; a fleet's per-pod mean) reads at least one sequence more: then
    other clients share the server, and the gauge, which counts them, is the batch. With
    neither, the level's users.

    Why not the gauge first: it is sampled at wall-clock moments, and in a closed loop a
    scrape often lands in the gap between one user's request and the next one's admission.
    The p50 of a dozen integer scrapes then read 9 at 10 users (7.5 at 8 in another run),
    so one point sat a sequence left of its place, and on a steep curve (5 ms a sequence)
    that alone bent a linear decode curve into a false knee ("compute-bound"). The
    client's count is taken at 2,000 moments of the level from its own records, leaves
    out its queued requests (no first token yet), so it follows the server's slots, and
    leaves out its users' think time.

    Where the metrics come from a balancer's own URL (``mixed``: each scrape one replica, of
    an unknown number), the gauge, as before: the client's count spans every replica.

    At least one: a token gap was measured, so a sequence was running.
    """
    gauge = gauge_sequences(analysis, level)
    if gauge is not None and getattr(getattr(analysis, "server", None), "mixed", False):
        # a balancer's own URL: each scrape reads one replica, and the client's count spans them all
        return max(1.0, gauge)
    own = client_in_batch(analysis, level)
    if math.isfinite(own) and own > 0:
        replicas = fleet_replicas(analysis, level)
        own = own / replicas if replicas else own
        return max(1.0, gauge if gauge is not None and gauge >= own + 1.0 else own)
    return max(1.0, gauge if gauge is not None else float(level.concurrency))


def gauge_sequences(analysis: Any, level: Any) -> float | None:
    """The server's running gauge over the level (p50; a fleet's per-pod mean), or None where not scraped."""
    p50 = gauge_p50(analysis, level, "running")
    return p50 if p50 is not None and p50 > 0 else None


def gauge_p50(analysis: Any, level: Any, role: str) -> float | None:
    """The p50 over the level of the server's first signal of ``role`` (a fleet's per-pod mean), or None
    where none was scraped."""
    server = getattr(analysis, "server", None)
    signal = server.first_of_role(role) if server is not None else None
    if signal is None:
        return None
    stats = server.pod_stats(level.index, signal.metric)
    return float(stats.p50) if stats is not None and stats.n and math.isfinite(stats.p50) else None


#: Moments per level at which :func:`client_in_batch` counts the batch.
_BATCH_SAMPLES = 2000


def client_in_batch(analysis: Any, level: Any) -> float:
    """How many of this client's requests were in the server's batch: the median over the level's window.

    A request is in the batch from the step that computed its first token (its first
    token's arrival less one step, the level's ITL p50) to its end; before that it waited
    for a slot. Every request counts for the part of that span inside the window, whichever
    level sent it (a request from the level before still shares the steps).

    Why the median over time, not the mean: the point's ITL is a median gap, and a step's
    time rises with its batch, so the median gap is the step of the median batch. A closed
    loop's users leave the batch for a moment between requests: the mean reads 9.5 at 10
    users while most steps, and so the median gap, ran all 10. NaN without the records or a window.
    """
    frame = getattr(analysis, "requests", None)
    start, end = getattr(level, "window_start", math.nan), getattr(level, "end_wall", math.nan)
    if frame is None or not len(frame) or "ttft_ms" not in frame or not end - start > 0:
        return math.nan
    step_s = level.itl_ms.p50 / 1000.0 if math.isfinite(level.itl_ms.p50) else 0.0
    first = frame["start_wall"].to_numpy(dtype=float) + frame["ttft_ms"].to_numpy(dtype=float) / 1000.0
    sent = frame["sent_wall"].to_numpy(dtype=float)
    last = frame["end_wall"].to_numpy(dtype=float)
    entered = np.maximum(first - step_s, sent)
    left = np.where(np.isnan(last), end, last)
    keep = np.isfinite(first) & (left > entered) & (left > start) & (entered < end)
    if not keep.any():
        return math.nan
    entered, left = np.sort(entered[keep]), np.sort(left[keep])
    moments = start + (np.arange(_BATCH_SAMPLES) + 0.5) * (end - start) / _BATCH_SAMPLES
    counts = np.searchsorted(entered, moments, side="right") - np.searchsorted(left, moments, side="right")
    return float(np.median(counts))


def fleet_replicas(analysis: Any, level: Any = None) -> int | None:
    """Replicas the client's requests were spread over.

    At a ``level`` where a replica's metrics did not answer and the others' gauges held the whole
    load, the replicas that carried it (:mod:`loadtest.analysis.silent_replicas`): dividing by all
    of them would halve a batch that one replica ran whole. Otherwise the run's resolved count
    (``target.replicas`` where declared, the replicas the metrics name, or the processes that
    answered a balancer's one metrics URL: :func:`loadtest.analysis.fleet.resolve_replicas`, as every
    per-replica figure of the run takes it): a fleet declared but not scraped per replica spreads the
    client's requests all the same, and its batch is their share. Else the replicas the metrics name.
    """
    server = getattr(analysis, "server", None)
    fleet = getattr(server, "fleet", None) if server is not None else None
    reporting = fleet.reporting.get(level.index) if fleet is not None and level is not None else None
    if reporting is not None and reporting.serving is not None:
        return reporting.serving
    resolved = getattr(getattr(analysis, "autoscaling", None), "replicas", None)
    if resolved:
        return int(resolved)
    if fleet is None:
        return None
    return server.replica_count


def mean_context(analysis: Any, level: Any) -> float:
    """Mean context a decode step reads at this level: prompt + half the output, of its successful requests.

    Successful only: a request cut at the level's end streamed part of its
    output, but while it ran its context grew as a whole one's does.
    """
    frame = analysis.requests
    if frame is None or not len(frame) or "prompt_tokens" not in frame:
        return math.nan
    here = (
        frame["measured"].to_numpy() & frame["ok"].to_numpy()
        & (frame["pos"].to_numpy() == _position(analysis, level))
    )
    prompt = frame["prompt_tokens"].to_numpy(dtype=float)[here]
    output = frame["completion_tokens"].to_numpy(dtype=float)[here]
    if not len(prompt) or np.isnan(prompt).all():
        return math.nan
    return float(np.nanmean(prompt) + np.nanmean(output) / 2.0)


def _position(analysis: Any, level: Any) -> int:
    """The level's position in window order (the frame's ``pos``): levels are sorted by load, windows by index."""
    order = sorted(lv.index for lv in analysis.levels)
    return order.index(level.index)


def decode_points(analysis: Any) -> list[DecodePoint]:
    """One point per closed-loop level with ITL, and per whole batch size: the last level wins.

    Whole sizes, so that a repeated concurrency, or levels past the server's slots (all
    running the slots' batch), give one point, not a cluster a few hundredths apart.
    """
    by_batch: dict[int, DecodePoint] = {}
    for lv in sorted(analysis.levels, key=lambda lv: lv.index):
        if lv.rate_rps is not None or not math.isfinite(lv.itl_ms.p50):
            continue
        n = running_sequences(analysis, lv)
        by_batch[round(n)] = DecodePoint(n, lv.itl_ms.p50, lv.itl_ms.p95, lv.output_tokens_per_s, lv.tpot_ms.p50)
    return list(by_batch.values())


def level_bounds(
    analysis: Any, fit: DecodeFit | None, ceilings: Ceilings | None = None, model: ModelSize | None = None
) -> dict[int, LevelBound]:
    """Each closed-loop level's bound, keyed by level index."""
    out: dict[int, LevelBound] = {}
    for lv in analysis.levels:
        if lv.rate_rps is not None or not math.isfinite(lv.itl_ms.p50):
            continue
        n = running_sequences(analysis, lv)
        context = mean_context(analysis, lv)
        if ceilings is not None and model is not None:
            reading = read_decode(ceilings, model, lv.itl_ms.p50, n, context if math.isfinite(context) else 0.0)
            if reading is not None:
                out[lv.index] = LevelBound(lv.concurrency, n, reading.bound, "roofline", context, reading.to_dict())
                continue
        if fit is not None:
            out[lv.index] = LevelBound(lv.concurrency, n, fit_bound(fit, n), "fit", context)
    return out


def slot_limit(batches: Sequence[tuple[float, float]]) -> float | None:
    """The most sequences the server ran at once, where the levels show it stop growing; else None.

    ``batches`` are (users, batch) per closed-loop level (:func:`running_sequences`). A
    level's batch a sequence or more short of its users means its other requests waited
    before the batch; that is a slot (or batch) limit, not a long prompt's compute, when
    a level with fewer users already ran as large a batch (within half a sequence): the
    batch stopped growing while the users grew. The limit is then that batch.
    """
    for users, batch in sorted(batches):
        if users - batch < 1.0:
            continue
        if any(u < users and b >= batch - 0.5 for u, b in batches):
            return round(batch, 1)
    return None


#: Newcomers admitted a step past which a level's median token gap is a step that also computed a
#: newcomer's prompt: with Poisson admissions, more than half the steps admit one past ln 2 a step.
PREFILLS_IN_MEDIAN = math.log(2.0)


def prefills_per_step(level: Any) -> float:
    """About how many requests a level's decode step admitted (and so prefilled) on average.

    Its served requests per second times its step (the ITL p50): in a steady closed loop each
    request that ends is replaced by one that starts. The decode fit reads each level's median
    gap as its decode step; past :data:`PREFILLS_IN_MEDIAN` that median is a step that also
    computed a prompt, and a point there sits above the decode curve by the prefill's cost. The
    quickstart's levels of 16-token answers admitted 0.9 and 1.9 a step at 16 and 32 users, and
    the point at 32 bent a straight decode line (the mock's 0.5 ms a sequence) into a knee,
    "past that each adds 0.91 ms: compute-bound"; a profile's decode levels admit 0.01-0.25.
    """
    step_s = level.itl_ms.p50 / 1000.0
    if not (math.isfinite(step_s) and math.isfinite(level.requests_per_s)):
        return math.nan
    return level.requests_per_s * step_s


def fit_run(analysis: Any) -> DecodeFit | None:
    """The decode fit of a run's closed-loop levels (None with fewer than two)."""
    return fit_decode(decode_points(analysis))
