"""Warnings: the reasons a reader should trust a number less.

Each warning is one self-contained sentence that says what happened, at which
levels, and what it means for the verdict or how to fix it. They are grouped
(one line per problem, listing levels) so a 30-level run does not print 90.
"""

from __future__ import annotations

import math
import time

from collections import defaultdict
from typing import Any, Mapping, Sequence

import pandas as pd

from loadtest.analysis.capacity import level_reasons
from loadtest.analysis.results import Check, LevelResult
from loadtest.analysis.slo import SloSpec
from loadtest.analysis.stop import incomplete_words

#: Chunks per second one load-generator process times within about 2 ms (p99), as
#: measured by benchmarks/bench_fidelity.py on a 2-core machine (README, performance).
CHUNKS_PER_S_PER_WORKER = 10_000

#: A level with fewer complete requests than this gets a "too short" warning.
MIN_COMPLETE = 10
#: Warn when more than this share of a level's requests outlived the level.
SPILLOVER_SHARE = 0.25


def _levels(values: Sequence[float]) -> str:
    return ", ".join(f"{v:g}" for v in values)


def _workers_advice(levels: Sequence[LevelResult]) -> str:
    """How many load processes the busiest level needs, from its token rate.

    Tokens/s is an upper bound on chunks/s (a chunk carries at least one token),
    so the advice errs towards more workers.
    """
    peak = max((lv.output_tokens_per_s or 0.0) for lv in levels) if levels else 0.0
    needed = max(2, math.ceil(peak / CHUNKS_PER_S_PER_WORKER))
    return (
        f"the busiest level streamed about {peak:,.0f} tokens/s and one worker process times about "
        f"{CHUNKS_PER_S_PER_WORKER:,} chunks/s accurately, so run it with --workers {needed} "
        "(one per core, or more machines)"
    )


def level_caveats(levels: Sequence[LevelResult], slo: SloSpec, min_complete: int = MIN_COMPLETE,
                  class_slos: Mapping[str, SloSpec] | None = None) -> list[str]:
    out: list[str] = []
    # open loop: levels are rates; "at concurrency 4" becomes "at rate (req/s) 4"
    unit = "rate (req/s)" if any(lv.rate_rps is not None for lv in levels) else "concurrency"
    saturated = [lv for lv in levels if lv.client_saturated and not lv.client_near_limit]
    near = [lv for lv in levels if lv.client_saturated and lv.client_near_limit]
    if near:  # a quiet client whose own timing error spans a limit: not a call for more workers
        reasons = level_reasons(near)
        cpu = max((float(lv.client.get("cpu_pct") or 0.0) for lv in near), default=0.0)
        out.append(
            f"at {unit} {_levels([lv.load for lv in near])} a verdict sits within the client's own timing error "
            f"of its limit" + (f" ({'; '.join(reasons)})" if reasons else "")
            + f"; the client was not busy (at most {cpu:.0f}% of a core), so more --workers would not narrow "
            "that error: its stamps were late by waking up on this host, which a load generator on a machine "
            "apart from the server's narrows"
        )
    if saturated:
        reasons = level_reasons(saturated)
        out.append(
            f"the load generator was saturated at {unit} {_levels([lv.load for lv in saturated])}"
            + (f" ({'; '.join(reasons)})" if reasons else "")
            + ": latencies there include the client's own delay; " + _workers_advice(levels)
        )
    contended = [lv for lv in levels if lv.host_contended]
    if contended:  # the host's fault, not the client's: never the --workers advice
        reasons = level_reasons(contended)
        out.append(
            f"the host was busy at {unit} {_levels([lv.load for lv in contended])}, so latencies there include "
            "waiting for a CPU that other processes held (host_contended, not client_saturated)"
            + (f": {'; '.join(reasons)}" if reasons else "")
        )
    out += _whole_request_caveats(levels, slo, class_slos or {}, unit, min_complete)
    low: dict[str, list[float]] = defaultdict(list)
    empty: dict[str, list[float]] = defaultdict(list)
    answered: dict[str, bool] = defaultdict(bool)  # did any of those levels have a request that succeeded?
    for lv in levels:
        for check in lv.checks:
            key = f"{check.class_name}.{check.name}" if check.class_name else check.name  # per class
            if check.verdict == "no_data" and lv.requests:
                empty[key].append(lv.load)
                answered[key] |= lv.errors < lv.requests
            elif check.low_n and check.verdict != "no_data" and _low_n_matters(check):  # no sample: "no request was measured"
                low[key].append(lv.load)
    for name, at in low.items():
        if name.split(".")[-1] == "error_rate" and slo.max_error_rate:
            out.append(
                f"{name} is judged on fewer than 1/max_error_rate = {1 / slo.max_error_rate:g} requests "
                f"at {unit} {_levels(at)} (flagged low_n): a single failure already exceeds the budget"
            )
            continue
        if name.split(".")[-1] == "valid_output_rate":  # the floor: one broken answer in fewer than 1/(1 - floor)
            out.append(
                f"{name} is judged on so few checked answers at {unit} {_levels(at)} (flagged low_n) that a single "
                "invalid one already puts the share under the floor; lengthen the levels"
            )
            continue
        out.append(
            f"{name} is computed from too few samples at {unit} {_levels(at)} (flagged low_n): "
            "the percentile is close to the largest sample; lengthen the levels"
        )
    for name, at in empty.items():
        if not answered[name]:
            hint = " (every request there failed)"
        else:
            hint = " (every response arrived in a single chunk?)" if name.startswith("itl_ms") else ""
        out.append(f"{name} has no samples at {unit} {_levels(at)}{hint}; those levels are uncertain")
    nodata = [lv.load for lv in levels if lv.status == "no_data"]
    if nodata:
        out.append(f"no request was measured at {unit} {_levels(nodata)}; those levels are ignored")
    if slo.is_empty:
        out.append("no SLOs are defined: every level passes, so the capacity is only a lower bound")
    return out


#: A failed budget or floor resting on this many bad answers or more is no artefact of a small sample.
FEW_BAD = 3


def _judges_whole_requests(slo: SloSpec) -> bool:
    """Whether an SLO judges e2e or TPOT, the metrics that need requests that ran their whole course."""
    return any(c.metric in ("e2e_ms", "tpot_ms") for c in slo.checks)


def _held(level: LevelResult) -> bool:
    """The level's load was held until its measured requests ended (run.json ``levels[].hold``)."""
    return bool(level.decision.get("hold"))


def _finished(level: LevelResult) -> int:
    """Requests that ran their whole course at the level's load: its window's, or with a hold every measured one."""
    return level.requests if _held(level) else level.complete


def _spill_share(level: LevelResult) -> float:
    """The share of the level's requests that outlived its window."""
    started = level.requests + level.cancelled
    return level.spillover / started if started else 0.0


def _whole_request_caveats(levels: Sequence[LevelResult], slo: SloSpec, class_slos: Mapping[str, SloSpec],
                           unit: str, min_complete: int) -> list[str]:
    """Warnings about e2e and TPOT, for each SLO that judges them: too few whole requests, spillover.

    With request classes each class is judged by its own SLO (the top-level one only where a class
    has none), so each class whose SLO judges e2e or TPOT is counted on its own requests: a
    summarize class with 4 requests at a level was never warned about while the top-level SLO
    judged no e2e. A level that held its load (the hold) served every measured request at that
    load: its count is its measured requests, and its spillover ended in the hold, never under the
    next level's load, so it gets no spillover warning.
    """
    groups: list[tuple[str, list[LevelResult]]] = []
    if class_slos:
        for name, class_slo in class_slos.items():
            if _judges_whole_requests(class_slo):
                groups.append((f"the {name} class: ", [lv.classes[name] for lv in levels if name in lv.classes]))
    elif _judges_whole_requests(slo):
        groups.append(("", list(levels)))
    out: list[str] = []
    for whose, group in groups:
        short = [lv for lv in group if lv.requests and _finished(lv) < min_complete]
        if short:
            detail = ", ".join(f"{lv.load:g} ({_finished(lv)})" for lv in short)
            out.append(
                f"{whose}levels are too short for the output length: fewer than {min_complete} requests started "
                f"and finished at their level's load (inside the measured window, or in the level's hold) at "
                f"{unit} {detail}; e2e and TPOT there rest on too few requests"
            )
        spill = [lv for lv in group if not _held(lv) and _spill_share(lv) > SPILLOVER_SHARE]
        if spill:
            detail = ", ".join(f"{lv.load:g} ({_spill_share(lv):.0%})" for lv in spill)
            out.append(
                f"{whose}many requests outlived their level (spillover) at {unit} {detail}: their e2e and TPOT "
                "count at the level they started in but were partly served under the next level's load; "
                "lengthen the levels"
            )
    return out


def _low_n_matters(check: Check) -> bool:
    """A small sample is worth a warning only where it weighs on the verdict.

    The error budget: only when the level had a failure (with none, it passes
    whatever n). A percentile: only when it is not a certain failure (failures
    past the percentile decide it however few samples there are). The same for
    the budget and the floor once a failure rests on :data:`FEW_BAD` bad answers or
    more (3 invalid of 8 under a 90% floor is not in doubt, and "lengthen the levels"
    beside "fail, decided early" read as a contradiction); one or two bad answers
    failing a fine floor on few requests is what the warning is for.
    """
    if check.name == "error_rate":
        bad = check.value * check.n if math.isfinite(check.value) else 0.0
    elif check.name == "valid_output_rate":  # the floor: only when an answer was invalid
        bad = (1.0 - check.value) * check.n if math.isfinite(check.value) else 0.0
    else:
        return check.verdict != "fail"
    # a failure that rests on a few bad answers is the resolution's doing; on several, it is not in doubt
    return bad > 0.5 and not (check.verdict == "fail" and bad >= FEW_BAD)


def _worker_loss(loss: Any) -> str:
    """One line per lost worker: who, when, and which level it hurt."""
    if not isinstance(loss, Mapping):
        return f"a worker was lost during the run ({loss})"
    when = loss.get("lost_wall")
    at = time.strftime("%H:%M:%S UTC", time.gmtime(when)) if isinstance(when, (int, float)) else "an unknown time"
    level = loss.get("concurrency")
    where = f"during concurrency {level}" if level else "between levels"
    last = loss.get("last_records_wall")
    in_flight = loss.get("in_flight_at_last_records")
    if isinstance(last, (int, float)) and isinstance(in_flight, int):
        kept = time.strftime("%H:%M:%S", time.gmtime(last))
        missing = (
            f"its records up to {kept} are kept; the {in_flight} requests it had in flight then, and those it "
            "finished after, are missing from that level"
        )
    else:
        missing = "the requests it had in flight and had not yet sent are missing from that level"
    return (
        f"worker {loss.get('worker', '?')} was lost {where} at {at}: {missing}, "
        f"and its users were moved to the remaining workers"
    )


def run_caveats(run: Mapping[str, Any], frame: pd.DataFrame) -> list[str]:
    out: list[str] = []
    if run.get("complete") is False:
        out.append(incomplete_words(run))
    for loss in run.get("workers_lost") or []:
        out.append(_worker_loss(loss))
    warm = run.get("warmup_requests") or {}
    if warm.get("failed"):  # the terminal said it with the kinds as it ran; summary.json keeps the count
        out.append(f"{warm['failed']} of {warm.get('sent')} warm-up requests failed (not measured); the first "
                   "level may have met the same")
    if len(frame):
        # level_index -1: started when no level was in force (after the last one), not an orphan
        orphans = int(((frame["pos"] < 0) & (frame["level_index"] >= 0)).sum())
        if orphans:
            out.append(f"{orphans} requests name a level that run.json does not know; they were ignored")
        ok = frame[frame["ok"]]
        sources = ok["token_source"].value_counts(dropna=True)
        if "chunks" in sources.index:
            out.append(
                f"{int(sources['chunks'])} of {len(ok)} successful requests have token counts estimated as one "
                "per chunk (the server reported no usage): TPOT and tokens/s may be off"
            )
    return out
