"""Why the capacity stops where it does: a slot queue, the decode step, or the prompts' compute.

The capacity names the check that failed first (``capacity.binding``); this module
names the mechanism behind it, from what the run measured at the first failing level,
so that a pre-launch test answers "why there" as well as "how many":

``slots``
    The server's own waiting count (vLLM's ``num_requests_waiting``, SGLang's queue,
    TGI's queue size, llama.cpp's deferred requests) read a request or more at the first
    failing level, and a waiting-time check (TTFT, e2e: the registry's ``queue_wait``)
    failed: requests waited for a slot, so that time grew with the queue, not with the
    step. Room for more sequences (KV-cache memory, the batch limit) moves this capacity;
    a faster step does little.
``queue_or_prefill``
    No waiting count was scraped, a waiting-time check failed, and fewer of this client's
    requests were in the server's batch than there were users, by a sequence or more
    (:func:`loadtest.analysis.bounds.running_sequences`: a request joins the batch a step
    before its first token). The client cannot tell a request waiting for a slot from one
    whose prompt is being computed: both are time before the first token, so it says
    which two, and that the server's waiting count would tell them apart.
``decode_step``
    A per-token check (ITL, TPOT) failed, or an e2e check with no queue where the first
    token is under half of a request's time: each step takes longer as the batch grows,
    and the decode fit (``decode_fit``) says at what cost per sequence.
``prefill``
    A waiting-time check failed with every request in the batch, and the first token took
    more than three decode steps at the median. Without a queue a newcomer waits for the
    step running when it arrives (half a step on average) and then its own step, which
    computes its prompt: about 1.5 steps, plus the prompt's compute. Past three steps that
    compute is more than half of the time to the first token: prefill dominates.
``first_step``
    The same, but within three steps: the time to the first token is mostly steps, and a
    step grows with the batch.
``errors``
    The error budget failed first (its kinds are in the headline), or failures alone put the
    binding percentile past its limit: a percentile counts a failed request as unbounded, so
    once more than ``100 − q`` percent of the requests failed (refused, timed out, rate
    limited) the p``q`` is unbounded whatever the server's latency. Naming a slot queue or the
    step there would send the user after the wrong cause (a mock refusing past its batch read
    "slots: … the p95 TTFT grew with the queue" at 68% refusals).

None where there is no first failing level, or a check of another kind (valid output)
bound it. For a rate level (open loop, trace replay) the "users" are the requests in flight
there (the time average, ``open_loop.mean_in_flight``: queued and running alike), which the
batch is then compared with. The figures are per replica for a fleet, as
:func:`running_sequences` counts them.
Pure functions over :class:`~loadtest.analysis.results.Analysis`.
"""

from __future__ import annotations

import math
from typing import Any

from loadtest.analysis.autoscaling import level_at
from loadtest.analysis.bounds import fleet_replicas, gauge_p50, running_sequences
from loadtest.analysis.silent_replicas import shared_load
from loadtest.analysis.failures import kinds_text
from loadtest.metric_registry import BY_NAME, LABELS, PERCENTILES, names

#: Without the server's waiting count, a wait before the batch is claimed when the batch is short of
#: the users by at least this many sequences.
QUEUED_SEQUENCES = 1.0
#: The first token past this many steps, with no queue, is mostly the prompts' compute (module doc).
PREFILL_STEPS = 3.0
#: What a newcomer waits without a queue, in steps: half the running one, then its own.
_STEPS_WITHOUT_PREFILL = 1.5


def capacity_limit(analysis: Any) -> dict[str, Any] | None:
    """``{kind, users, sequences, waiting, binding, sentence}`` at the first failing level, or None."""
    cap = analysis.capacity
    if getattr(getattr(analysis, "target_lost", None), "decides_capacity", False):
        return None  # the first failing level measured an outage, not what limits the load
    level = level_at(analysis.levels, cap.first_failing, cap.first_failing_rate_rps)  # a trace's levels have rates
    if level is None or cap.binding is None:
        return None
    binding = cap.binding.split(".")[0]
    replicas = fleet_replicas(analysis, level) or 1  # as running_sequences counts the batch: per replica
    rate = level.rate_rps is not None
    in_flight = (level.open_loop or {}).get("mean_in_flight") if rate else level.concurrency
    if in_flight is None or not math.isfinite(float(in_flight)):
        return None
    users = float(in_flight) / replicas
    sequences = running_sequences(analysis, level) if math.isfinite(level.itl_ms.p50) else math.nan
    waiting = gauge_p50(analysis, level, "waiting")
    out: dict[str, Any] = {
        "kind": None, "users": _r(users), "sequences": _r(sequences), "waiting": _r(waiting) if waiting is not None else None,
        "binding": cap.binding, "sentence": "",
    }
    listed = fleet_replicas(analysis)
    per = " per replica" if replicas > 1 else ""
    if rate:  # a rate level holds no users: name it by its load, and its requests in flight
        on = f", on {replicas} of the {listed} replicas" if listed and replicas < listed else per
        at = f"at {level.label} ({users:.1f} requests in flight on average{on})"
    else:
        at = f"at {level.concurrency} users" + _per_replica(users, replicas, listed, _silent(analysis, level))
    pct = cap.binding.split(".")[1] if "." in cap.binding else ""
    label = f"{pct} {LABELS.get(binding, binding)}".strip()
    if binding == "error_rate":
        out["kind"] = "errors"
        out["sentence"] = f"errors: {at} the error budget is spent before any latency limit"
        return out
    own = level.classes.get(cap.binding_class, level) if cap.binding_class else level
    failed_share = _failures_reach(own, binding, pct)
    if failed_share is not None:
        whose = f"the {cap.binding_class} class's " if cap.binding_class else ""
        out["kind"] = "errors"
        kinds = f" ({kinds_text(own.errors_by_kind)})" if own.errors_by_kind else ""
        out["sentence"] = (f"errors: {at} {failed_share:.0%} of {whose}requests failed{kinds}, more than the "
                           f"{round(100 * (1 - PERCENTILES[pct]), 6):g}% a {label} can leave out: the failures, not the "
                           "latency of the ones answered, put it past its limit")
        return out
    if binding in names(decode_step=True):
        out["kind"] = "decode_step"
        out["sentence"] = (f"the decode step: {at} each token's step grows with the batch"
                           + (f" of about {sequences:.0f} sequences{per}" if math.isfinite(sequences) else "")
                           + f", and the {label} crosses its limit (decode_fit gives the cost per sequence)")
        return out
    if binding not in names(queue_wait=True) or not math.isfinite(sequences):
        return None
    queued = users - sequences
    if waiting is not None and waiting >= 1:
        out["kind"] = "slots"
        out["sentence"] = (f"slots: the server ran about {sequences:.0f} of these requests at once{per}, and {at} "
                           f"its waiting count read {waiting:g}, so the {label} grew with the queue, not the step "
                           "(room for more sequences, e.g. KV-cache memory or the batch limit, moves it; a faster "
                           "step does little)")
        return out
    if waiting is None and queued >= QUEUED_SEQUENCES:
        out["kind"] = "queue_or_prefill"
        out["sentence"] = (f"a slot queue or the prompts' compute: {at} only about {sequences:.0f} of these requests "
                           f"were in the server's batch at once{per} (a request joins it a step before its first "
                           f"token); the rest waited for a slot or for their prompt's compute, and the {label} grew "
                           "with that wait (the server's waiting count, not scraped here, would tell which)")
        return out
    step, first = level.itl_ms.p50, level.ttft_ms.p50
    if not (math.isfinite(step) and step > 0 and math.isfinite(first)):
        return None
    steps = first / step
    no_queue = ("no request waited for a slot (the server's waiting count read 0)" if waiting is not None
                else "every request was in the batch (no slot queue)")
    whole = level.e2e_ms.p50
    if binding == "e2e_ms" and math.isfinite(whole) and whole > 0 and first < whole / 2:
        out["kind"] = "decode_step"
        out["sentence"] = (f"the decode step: {at} {no_queue}, and a request's time is mostly its tokens' steps "
                           f"(the first token {first / whole:.0%} of it at the median), which grow with the batch "
                           "(decode_fit gives the cost per sequence)")
    elif steps > PREFILL_STEPS:
        out["kind"] = "prefill"
        beyond = first - _STEPS_WITHOUT_PREFILL * step
        out["sentence"] = (f"the prompts' compute (prefill): {at} {no_queue}, but the first token took "
                           f"{steps:.1f} decode steps at the median ({first:.0f} ms, a step {step:.0f} ms): about "
                           f"{beyond:.0f} ms beyond the 1.5 steps a newcomer waits without its prompt")
    else:
        out["kind"] = "first_step"
        out["sentence"] = (f"the step itself: {at} {no_queue}, and the first token took {steps:.1f} decode steps "
                           f"at the median (a step {step:.0f} ms); the step grows with the batch")
    return out


def _failures_reach(level: Any, metric: str, pct: str) -> float | None:
    """The level's error rate where it reaches past percentile ``pct`` (``"p95"``) of ``metric``, else None.

    Failures enter a per-request percentile as +inf (:class:`~loadtest.analysis.results.Stats`), so an
    error rate above ``1 − q/100`` makes the p``q`` unbounded by failures alone; never a per-gap one (ITL:
    a refused request adds no gap, a broken stream one). The smaller of the error rate and the metric's own
    share of unbounded samples: a request that failed after its first token keeps a finite TTFT, and the
    metric's count also holds requests the harness cut after waiting past the limit (slow, not failed)."""
    entry = BY_NAME.get(metric)
    stats = getattr(level, metric, None)
    if entry is None or entry.per != "request" or pct not in PERCENTILES or not getattr(level, "requests", 0):
        return None
    if stats is None or not getattr(stats, "n", 0):
        return None
    share = min(float(level.error_rate), stats.n_failed / stats.n)
    return share if math.isfinite(share) and share > 1 - PERCENTILES[pct] else None


def _per_replica(users: float, replicas: int, listed: int | None, silent: list[str]) -> str:
    """``" (16 a replica)"``; where fewer replicas than listed carried the level, how many did; where a
    replica's metrics did not answer and it cannot be told whether it served, the split is only an if."""
    if listed is not None and replicas < listed:
        if replicas == 1:
            return f" (all on 1 of the {listed} replicas: the only one answering its metrics ran them)"
        return f" ({users:g} a replica on {replicas} of the {listed}: the ones answering their metrics ran them all)"
    if silent and replicas > 1:
        who = silent[0] if len(silent) == 1 else ", ".join(silent)
        return f" ({users:g} a replica if {who}, whose metrics did not answer, served)"
    return f" ({users:g} a replica)" if replicas > 1 else ""


def _silent(analysis: Any, level: Any) -> list[str]:
    """The replicas whose metrics did not answer at the level where the others' gauges do not show whether
    they served (a fleet's; else none)."""
    fleet = getattr(getattr(analysis, "server", None), "fleet", None)
    reporting = fleet.reporting.get(level.index) if fleet is not None else None
    if reporting is None or shared_load(reporting, len(fleet.replicas)):
        return []
    return list(reporting.silent)


def _r(value: float) -> float | None:
    return round(float(value), 2) if math.isfinite(value) else None

