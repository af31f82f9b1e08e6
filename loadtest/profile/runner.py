"""Sequence a profile: the prefill run, the decode runs, the knee refinement, then the fits and outputs.

Each sweep is an ordinary run (:func:`loadtest.run.run_scenario`) in a
subfolder of the profile folder, so its records, summary.json and report.html
are there to inspect and re-analyze; this module only decides the next run
from the last one's analysis and hands the measurements to the fits.
"""

from __future__ import annotations

import math
import time

import numpy as np
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from loadtest.analysis import analyze_run
from loadtest.analysis.bounds import decode_points, gauge_sequences, mean_context, running_sequences
from loadtest.analysis.columns import boolean, numeric
from loadtest.analysis.decode_fit import DecodeFit, DecodePoint, fit_decode, knee_bracket, probes_between
from loadtest.analysis.prefill_fit import PrefillFit, fit_prefill
from loadtest.profile.fleet import FleetShare
from loadtest.profile.plan import ProfilePlan, decode_scenario, prefill_scenario
from loadtest.profile.sweep import SweepPrinter
from loadtest.server_facts import read_server_facts
from loadtest.records_stream import read_scalars
from loadtest.run import RunOptions, make_run_dir, run_scenario
from loadtest.scenario import Scenario


@dataclass
class ProfileOptions:
    out: Path | None = None
    reports_dir: Path = Path("reports")
    plan: ProfilePlan = field(default_factory=ProfilePlan)


@dataclass
class ProfileData:
    """Everything measured, for :mod:`loadtest.profile.output`."""

    scenario: Scenario
    folder: Path
    server_facts: dict[str, Any]
    prefill: PrefillFit | None = None
    decode: DecodeFit | None = None
    #: Mean context tokens per sequence (prompt + half the output), by batch size, and overall.
    contexts: dict[float, float] = field(default_factory=dict)
    context_tokens: float = math.nan
    runs: list[str] = field(default_factory=list)
    #: Decode points with the server's own running count beside the users (where scraped).
    running_check: list[dict[str, Any]] = field(default_factory=list)
    #: (users per replica, batch) of every decode level: where the batch stops growing, the server's slots.
    batches: list[tuple[float, float]] = field(default_factory=list)
    #: The replicas the users are spread over (a fleet behind a balancer; 1 for one server).
    fleet: FleetShare = field(default_factory=FleetShare)
    #: The users of the level each decode point (by its sequences) was measured at.
    users: dict[float, int] = field(default_factory=dict)
    #: The replicas that level ran on (:meth:`FleetShare.at_level`): fewer than ``fleet.replicas`` where
    #: one was down; its batch, users and tokens/s per replica are over this count.
    serving: dict[float, int] = field(default_factory=dict)
    #: The server's own view of the same requests (llama.cpp ``timings``), where it sends them:
    #: the same linear fit of its prompt_ms, and its median ms per generated token at one user.
    server_prefill: PrefillFit | None = None
    server_ms_per_token_1: float = math.nan
    #: The one-user run's own point (``decode-1``): the ladder's base and ``ms_per_token_1``,
    #: whatever batch the server's gauge gave it (another client's request reads 2).
    one_user: DecodePoint | None = None
    interrupted: bool = False
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def _run(scenario: Scenario, folder: Path, itl_growth_stop: float | None = None):
    """One ordinary run in ``folder``; returns (analysis, interrupted).

    Its terminal summary is a sweep's (:mod:`loadtest.profile.sweep`): its verdicts are the ladder's
    stopping rule (``itl_growth_stop`` × one sequence's ITL p50) or the error budget, not a capacity."""
    outcome = run_scenario(scenario, RunOptions(out=folder, summary_printer=SweepPrinter(itl_growth_stop)))
    return analyze_run(folder), outcome.interrupted


def _server_column(folder: Path, column: str):
    """(prompt tokens, the column) of the measured successful requests of a run, where the server timed them.

    Scalars only: the chunk lists (most of a run's bytes) are not read for these four columns."""
    frame = read_scalars(folder)
    values = numeric(frame, column)
    ok = boolean(frame, "ok") & ~boolean(frame, "warmup") & np.isfinite(values)
    return numeric(frame, "prompt_tokens")[ok], values[ok]


def _decode_points(analysis, data: ProfileData) -> list[DecodePoint]:
    """The run's points, after taking its replica count: its batches, users and gauge are per replica."""
    note = data.fleet.learn(analysis)
    if note:
        data.notes.append(note)
    points = decode_points(analysis)
    fleet = data.fleet
    for lv in sorted(analysis.levels, key=lambda lv: lv.index):  # as decode_points: the last level wins
        n = running_sequences(analysis, lv)
        serving = fleet.at_level(analysis, lv)  # the count n was divided by: the users' and tokens' too
        share = fleet.per_replica(float(lv.concurrency), serving)
        data.batches.append((share, n))
        data.users[n] = lv.concurrency
        data.serving[n] = serving
        if serving < fleet.replicas:
            data.notes.append(
                f"at {lv.concurrency} users {serving} of the {fleet.replicas} replicas ran the load (the others' "
                "metrics did not answer, and the gauges of those that did held it all): that point's sequences, "
                f"users and tokens/s per replica are over {serving}")
        c = mean_context(analysis, lv)
        if math.isfinite(c):
            data.contexts[n] = c
        gauge = gauge_sequences(analysis, lv)
        if gauge is not None and gauge != share:
            row = {"users": lv.concurrency, "server_running_p50": gauge}
            if fleet.replicas > 1:
                row["users_per_replica"] = share
            data.running_check.append(row)
    if data.contexts:
        data.context_tokens = sum(data.contexts.values()) / len(data.contexts)
    return points


def run_profile(scenario: Scenario, options: ProfileOptions) -> ProfileData:
    """Run the plan against the scenario's target; the fits and folder, whatever was measured."""
    started = time.monotonic()
    plan = options.plan
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    folder = make_run_dir(options.out or options.reports_dir / f"{scenario.name}-profile-{stamp}")
    facts = read_server_facts(scenario.target)
    data = ProfileData(scenario=scenario, folder=folder, server_facts=facts)
    declared = getattr(scenario.target, "replicas", None)
    if declared:  # the ladder needs it before any sub-run has counted
        data.fleet = FleetShare(int(declared), "declared")
    try:
        _profile(scenario, plan, data)
    except KeyboardInterrupt:
        data.interrupted = True
    data.notes += plan.notes
    data.wall_s = time.monotonic() - started
    return data


def _profile(scenario: Scenario, plan: ProfilePlan, data: ProfileData) -> None:
    folder = data.folder
    lengths = plan.prompt_ladder(data.server_facts.get("n_ctx"))
    analysis, stop = _run(prefill_scenario(scenario, plan, lengths), folder / "prefill")
    data.runs.append("prefill")
    frame = analysis.requests
    ok = frame["measured"].to_numpy() & frame["ok"].to_numpy()
    data.prefill = fit_prefill(frame["prompt_tokens"].to_numpy(dtype=float)[ok], frame["ttft_ms"].to_numpy(dtype=float)[ok])
    tokens, prompt_ms = _server_column(folder / "prefill", "server_prompt_ms")
    data.server_prefill = fit_prefill(tokens, prompt_ms)
    note = data.fleet.learn(analysis)  # the ladder's users are sequences × the replicas the prefill run counted
    if note:
        data.notes.append(note)
    if stop:
        data.interrupted = True
        return

    points: dict[float, DecodePoint] = {}
    analysis, stop = _run(decode_scenario(scenario, plan, [1], "decode-1"), folder / "decode-1")
    data.runs.append("decode-1")
    # The one-user run's own point is the base, whatever batch the server's gauge gave it.
    base = None
    for p in _decode_points(analysis, data):
        points[p.sequences] = base = p
    _, per_token = _server_column(folder / "decode-1", "server_predicted_per_token_ms")
    if len(per_token):
        data.server_ms_per_token_1 = float(np.median(per_token))
    data.one_user = base
    if base is not None and (note := plan.short_level_note(base.itl_p50_ms)):
        data.notes.append(note)
    if stop or base is None:
        data.interrupted = stop
        if base is None:
            data.notes.append("one user's decode gave no inter-token latency; no decode curve")
        return
    ladder = data.fleet.users(plan.batch_ladder())  # --max-batch is sequences per replica
    limit = plan.itl_growth_stop * base.itl_p50_ms
    if ladder:
        analysis, stop = _run(decode_scenario(scenario, plan, ladder, "decode-ladder", limit), folder / "decode-ladder",
                              plan.itl_growth_stop)
        data.runs.append("decode-ladder")
        for p in _decode_points(analysis, data):
            points[p.sequences] = p
        # the ladder's own levels (users), not the batches they ran (a slot limit caps those): say why the
        # asked-for batch was not reached, which profile.json did not
        ran = max((lv.concurrency for lv in getattr(analysis, "levels", None) or []), default=None)
        binding = getattr(getattr(analysis, "capacity", None), "binding", None)
        if ran is not None and not stop and ran < max(ladder):
            why = (f"its ITL p50 passed {plan.itl_growth_stop:g} × one sequence's ({limit:.2f} ms), where the ladder "
                   "stops (a larger batch there only lengthens every token's step)"
                   if binding in (None, "itl_ms.p50") else f"its {binding} failed (see that run's folder)")
            share = data.fleet
            each = f" a replica ({ran:g} users over {share.replicas})" if share.replicas > 1 else ""
            data.notes.append(f"the decode ladder stopped at {share.per_replica(ran):g} of "
                              f"{share.per_replica(max(ladder)):g} sequences{each}: {why}")
    for round_no in range(1, plan.knee_rounds + 1):
        fit = fit_decode(list(points.values()))
        bracket = knee_bracket(fit) if fit is not None else None
        if stop or bracket is None:
            break
        # the bracket is in sequences per replica; the users that put them there are sequences × replicas
        probes = [n for n in probes_between(*bracket, count=plan.knee_probes) if float(n) not in points]
        if not probes:
            break
        name = f"decode-knee-{round_no}"
        analysis, stop = _run(decode_scenario(scenario, plan, data.fleet.users(probes), name), folder / name)
        data.runs.append(name)
        for p in _decode_points(analysis, data):
            points[p.sequences] = p
    data.decode = fit_decode(list(points.values()))
    data.interrupted = stop
