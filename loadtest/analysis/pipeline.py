"""The analysis pipeline's two entry points: :func:`analyze` and :func:`analyze_run`.

Records → per-level metrics → SLO verdicts → capacity, wired from the modules
the package's index lists (:mod:`loadtest.analysis`). The package itself
imports this module only when one of these names is asked for, so that the
SLO type (:mod:`loadtest.analysis.slo`), which every command's scenario
parse needs, does not bring pandas with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from loadtest.analysis.prefix_cache import level_prefix_cache
from loadtest.analysis.prompt_length import prompt_length
from loadtest.analysis.trace_levels import mark_speedups, partial_replay_caveat
from loadtest.analysis.autoscaling import AutoscalingOptions, level_at, recommend
from loadtest.analysis.bootstrap import DEFAULT_RESAMPLES, rng_for
from loadtest.analysis.capacity import find_capacity
from loadtest.analysis.classes import class_slos as class_slos_for
from loadtest.analysis.classes import class_model, judge_classes, scenario_classes
from loadtest.analysis.caveats import MIN_COMPLETE, level_caveats, run_caveats
from loadtest.analysis.client_error import judge_client
from loadtest.analysis.host_contention import judge_host, shared_host_warning
from loadtest.analysis.chunk_lists import ChunkSource, arrow_source, frame_source
from loadtest.analysis.chunk_pass import chunk_pass
from loadtest.analysis.open_loop import short_level_caveat
from loadtest.analysis.served_span import untold_caveat
from loadtest.analysis.keep_up import confirm_keep_up
from loadtest.analysis.offered import arrival_cv, bracket_caveat, offered_caveat
from loadtest.analysis.decision_reason import reconcile_why
from loadtest.analysis.sustained import judge_sustained, sustainable_at_capacity
from loadtest.analysis.columns import numeric, text
from loadtest.analysis.frame import outcomes, request_frame, send_e2e_ms
from loadtest.analysis.images import level_images
from loadtest.analysis.hold_cut import cut_at_hold_end, hold_cut_ms
from loadtest.analysis.metrics import describe, level_results
from loadtest.analysis.results import Analysis, LevelResult
from loadtest.analysis.fleet import resolve_replicas
from loadtest.analysis.server import server_view
from loadtest.analysis.silent_replicas import metrics_urls, silence_warnings
from loadtest.analysis.slo import SloSpec
from loadtest.analysis.stop import mark_cut_short
from loadtest.analysis.target_lost import lost_capacity_message, target_lost
from loadtest.analysis.verdict import evaluate_level, honour_decision, verdict_confidence
from loadtest.analysis.windows import level_windows
from loadtest.errors import InputError


def analyze(
    requests: pd.DataFrame,
    run: Mapping[str, Any],
    slo: SloSpec,
    *,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    min_complete: int = MIN_COMPLETE,
    class_slos: Mapping[str, SloSpec] | None = None,
    confidence: float | None = None,
    server_samples: pd.DataFrame | None = None,
    autoscaling: AutoscalingOptions | None = None,
    chunks: ChunkSource | None = None,
) -> Analysis:
    """Analyze one run's records against ``slo``.

    ``requests`` has the columns of :data:`loadtest.records.SCHEMA` (as
    returned by :func:`loadtest.records.read_requests`), or all but the chunk
    lists when ``chunks`` yields those batch by batch (:func:`analyze_run`
    streams them from requests.parquet); ``run`` is run.json as
    a dict. Deterministic for a given ``seed``. Never raises on odd data
    (empty frames, missing levels, all failures): such runs get a ``no_data``
    or ``uncertain`` verdict and warnings instead. ``server_samples`` are the
    scraped server metrics (``server_metrics.parquet``), None when not scraped;
    ``autoscaling`` defaults to run.json's ``autoscaling`` options.

    With request classes (a ``class`` column, ``workload.classes`` in the
    run's scenario), each class is also analyzed alone and judged by its own
    SLO (``class_slos``; by default the scenario's, else ``slo``), and a level
    holds only if every class does (see :mod:`loadtest.analysis.classes`).
    """
    run = dict(run)
    cut_ms = hold_cut_ms(requests, run)  # the chunk lists are cut where they are read
    requests = cut_at_hold_end(requests, run, lists=False)
    source = chunks if chunks is not None else frame_source(requests)
    if confidence is None:
        confidence = verdict_confidence(run)
    windows, warnings = level_windows(run, requests)
    frame, levels = _measure(requests, windows, slo, source, cut_ms, seed=seed, resamples=resamples, confidence=confidence)
    mark_speedups(levels, run.get("trace"))
    confirm_keep_up(levels, server_samples)  # the server's waiting count beside the client's "!"
    turns = numeric(requests, "turn")
    # None for a record of no class (an arrival dropped at max_in_flight, before its class was drawn);
    # an object column keeps it None: pandas' own string column made it NaN, a class named "nan"
    classes = text(requests, "class")
    frame["class"] = pd.Series(classes, index=frame.index, dtype=object)
    frame["turn"] = turns

    slos = dict(class_slos) if class_slos is not None else class_slos_for(run, slo)[1]
    for name in sorted({c for c in classes if isinstance(c, str)} - set(slos)):
        slos[name] = slo  # a class in the records that the scenario does not name
    if slos:
        per_class = _measure_classes(
            requests, classes, windows, slos, source, cut_ms, seed, resamples, confidence
        )
        own_slos = _judged_with_own_slos(run, slo, slos)
        for position, level in enumerate(levels):
            judge_classes(level, {name: lv[position] for name, lv in per_class.items()}, slos, slo)
            if own_slos:
                honour_decision(level)  # per-class checks too: the run climbed (or stopped) on them
            reconcile_why(judge_host(judge_client(judge_sustained(level, frame, slo))))
    else:
        own_slo = _judged_with_own_slo(run, slo)
        for level in levels:
            evaluate_level(level, slo)
            if own_slo:
                honour_decision(level)
            reconcile_why(judge_host(judge_client(judge_sustained(level, frame, slo))))
    _attach_ttft_by_turn(levels, frame, turns, seed, resamples, confidence)
    level_images(requests, frame, levels)
    levels.sort(key=lambda lv: (lv.load, lv.index))
    mark_cut_short(levels, run)  # before the verdict's words: a stopped level blames the stop
    capacity = find_capacity(levels, slo, confidence)
    lost = target_lost(requests, levels, run.get("after_load"))
    outage = lost_capacity_message(levels, lost) if lost is not None else None
    if outage is not None:  # the outage's words, not the load's: "holds 1 user; at 2 the p95 TTFT is unbounded"
        capacity.message = outage
        lost.decides_capacity = True
    if slos:
        capacity.classes = {
            name: find_capacity([lv.classes[name] for lv in levels], class_slo, confidence, class_name=name)
            for name, class_slo in slos.items()
        }

    declared = scenario_classes(run)
    capacity.binding_model = class_model(run, declared, capacity.binding_class)
    for name, class_cap in capacity.classes.items():
        class_cap.binding_model = class_model(run, declared, class_cap.binding_class)
    if declared and slo.checks and all(isinstance(c.get("slo"), Mapping) for c in declared):
        unused = ", ".join(c.name for c in slo.checks)
        warnings.append(
            f"the top-level SLO's latency checks ({unused}) judge no request class: every class has its own slo"
        )
    warnings += run_caveats(run, frame)
    shared = shared_host_warning(levels, run)
    if shared:
        warnings.append(shared)
    warnings += level_caveats(levels, slo, min_complete, slos)
    hidden = short_level_caveat(levels, capacity, slo, frame)
    if hidden:
        warnings.append(hidden)
    untold = untold_caveat(levels, capacity)
    if untold:
        warnings.append(untold)
    partial = partial_replay_caveat(levels, capacity, run.get("trace"))
    if partial:
        warnings.append(partial)
    cv, warmup = arrival_cv(run), float(run.get("warmup_s") or 0.0)
    warnings += [w for w in (offered_caveat(levels, capacity, cv, warmup), bracket_caveat(levels, capacity, cv, warmup)) if w]
    server = server_view(server_samples, levels, run.get("server_metrics"))
    caches = level_prefix_cache(frame, numeric(requests, "cached_tokens"), server_samples,
                                [(lv.index, lv.window_start, lv.end_wall) for lv in levels])
    for level in levels:
        level.prefix_cache = caches.get(level.index)
    if server is not None:
        warnings += server.warnings
    options = autoscaling or AutoscalingOptions.from_dict(run.get("autoscaling"))
    replicas, replicas_source, replicas_warning = resolve_replicas(
        (run.get("target") or {}).get("replicas"), server.replica_count if server is not None else None,
        server.replica_source if server is not None else "metrics",
    )
    if replicas_warning:
        warnings.append(replicas_warning)
    if server is not None and server.fleet is not None:  # a replica down comes first: it changes what follows
        warnings[:0] = silence_warnings(
            server.fleet.reporting, server.fleet.scrapes, levels, metrics_urls(run.get("server_metrics")),
            replicas, replicas_source, level_at(levels, capacity.concurrency, capacity.rate_rps),
        )
    if lost is not None:  # first of all (a replica down too): every other line reads differently once the target is gone
        warnings.insert(0, f"{lost.words()}; every request is counted, as failed; the records are kept "
                        "(`loadtest analyze` re-reads them), and what was measured after it is the outage's")
    scaling = recommend(levels, capacity, server, options, replicas, replicas_source,
                        sustainable_at_capacity(levels, capacity, frame, slo))
    if outage is not None:  # the advice rests on the levels before the outage; the failing one measured the outage
        scaling.paragraph = (f"The target stopped answering during the run: this rests on the levels before it, and the "
                             f"capacity is a lower bound. {scaling.paragraph}")
    # only successful requests carry final token counts
    sources = frame.loc[frame["ok"], "token_source"].value_counts(dropna=True) if len(frame) else {}
    # as for completion tokens: failures never got a usage chunk, so count successes
    prompt_sources = pd.Series(text(requests, "prompt_token_source")[frame["ok"].to_numpy()]).value_counts(dropna=True)
    if prompt_sources.get("estimate", 0):
        warnings.append(
            f"prompt tokens of {int(prompt_sources['estimate'])} successful requests are estimated from the "
            "words sent (the server reported no usage.prompt_tokens)"
        )
    prompts = prompt_length(requests, frame["ok"].to_numpy(dtype=bool), run)
    if prompts is not None and prompts.warning():
        warnings.append(prompts.warning())

    return Analysis(
        name=str(run.get("name") or (run.get("scenario") or {}).get("name") or ""),
        target=dict(run.get("target") or {}),
        slo=slo,
        levels=levels,
        capacity=capacity,
        warnings=warnings,
        token_source={str(k): int(v) for k, v in sources.items()},
        warmup_s=float(run.get("warmup_s") or 0.0),
        run=run,
        requests=frame,
        confidence=confidence,
        server=server,
        autoscaling=scaling,
        class_slos=slos,
        prompt_token_source={str(k): int(v) for k, v in prompt_sources.items()},
        target_lost=lost,
        prompt_length=prompts,
    )


def _measure(
    requests: pd.DataFrame,
    windows: list,
    slo: SloSpec,
    source: ChunkSource,
    cut_ms: np.ndarray | None,
    *,
    rows: np.ndarray | None = None,
    seed: int,
    resamples: int,
    confidence: float,
) -> tuple[pd.DataFrame, list[LevelResult]]:
    """Records → the per-request frame and one unjudged :class:`LevelResult` per window (window order).

    ``source`` yields the chunk lists of every record, ``cut_ms`` (per record, NaN: none)
    where the hold cut each (see :func:`hold_cut.hold_cut_ms`); ``rows`` (a bool per record
    of the source) when ``requests`` are only those records.
    """
    ok, _kinds, _cancelled, failed = outcomes(requests)
    reported = numeric(requests, "completion_tokens")
    reported = np.where(ok & (reported > 0), reported, np.nan)  # final counts exist for successes only
    # chunk times are relative to the actual send (open loop: not the scheduled time)
    totals = chunk_pass(
        source, windows, numeric(requests, "start_wall"), send_e2e_ms(requests), failed, reported,
        rows=rows, cut_ms=cut_ms,
    )
    frame = request_frame(requests, windows, totals, slo)
    levels = level_results(
        frame, windows, totals.itl, totals.tokens_per_window, seed=seed, resamples=resamples, confidence=confidence
    )
    return frame, levels


def _measure_classes(
    requests: pd.DataFrame,
    classes: np.ndarray,
    windows: list,
    slos: Mapping[str, SloSpec],
    source: ChunkSource,
    cut_ms: np.ndarray | None,
    seed: int,
    resamples: int,
    confidence: float,
) -> dict[str, list[LevelResult]]:
    """Each class's own levels (window order): the same analysis on its records alone."""
    out = {}
    for name, class_slo in slos.items():
        rows = classes == name
        mine = requests.loc[rows].reset_index(drop=True)
        out[name] = _measure(
            mine, windows, class_slo, source, cut_ms, rows=rows, seed=seed, resamples=resamples, confidence=confidence
        )[1]
    return out


def _attach_ttft_by_turn(
    levels: list[LevelResult], frame: pd.DataFrame, turns: np.ndarray, seed: int, resamples: int, confidence: float
) -> None:
    """TTFT per conversation turn at each level (levels in window order, as ``frame["pos"]`` counts)."""
    if np.isnan(turns).all():
        return
    pos = frame["pos"].to_numpy()
    ttft = frame["ttft_sample"].to_numpy(dtype=float)
    for position, level in enumerate(levels):
        here = (pos == position) & ~np.isnan(ttft)
        for turn in sorted({int(t) for t in turns[here & ~np.isnan(turns)]}):
            values = ttft[here & (turns == turn)]
            rng = rng_for(seed, level.index, "ttft_turn", turn)
            level.ttft_by_turn[turn] = describe(values, rng, resamples, confidence=confidence)


def _judged_with_own_slo(run: Mapping[str, Any], slo: SloSpec) -> bool:
    """Is ``slo`` the one the run's looks judged with (run.json's scenario), not a re-analysis with others?"""
    scenario = run.get("scenario")
    if not isinstance(scenario, Mapping):
        return False
    try:
        return SloSpec.from_dict(scenario.get("slo")) == slo
    except InputError:
        return False


def _judged_with_own_slos(run: Mapping[str, Any], slo: SloSpec, slos: Mapping[str, SloSpec]) -> bool:
    """With request classes: are the top-level SLO and every class's the ones the run's looks judged with?"""
    if not _judged_with_own_slo(run, slo):
        return False
    own = class_slos_for(run, slo)[1]  # no overrides: the scenario's own class SLOs
    return all(spec == own.get(name, slo) for name, spec in slos.items())


def analyze_run(
    run_dir: Path | str,
    slo_overrides: Iterable[str] = (),
    autoscaling_overrides: Mapping[str, float | None] | None = None,
    **options: Any,
) -> Analysis:
    """Analyze a run folder: SLOs from ``run["scenario"]["slo"]``, then CLI overrides.

    ``autoscaling_overrides`` (``headroom``, ``scale_up_s``, ``traffic_growth_per_min``)
    replace run.json's ``autoscaling`` options where not None. ``slo_overrides`` may
    name a request class (``summarize.e2e_ms.p95=15000``).

    Raises :class:`InputError` when the folder is not a run or an override is bad.
    """
    # The one function here that reads files: pyarrow's parquet readers load when a run folder is
    # analyzed, not for every import of the analysis (the live judge and the web UI import it).
    # The chunk lists are not read here but streamed by the analysis, a batch at a time.
    from loadtest.records import RUN_JSON, read_run_json
    from loadtest.records_stream import chunk_batches, read_scalars
    from loadtest.scrape.store import read_samples

    run_dir = Path(run_dir)
    if not (run_dir / RUN_JSON).is_file():
        raise InputError(f"{run_dir}: not a run folder (no {RUN_JSON})")
    try:
        run = read_run_json(run_dir)
    except ValueError as err:
        raise InputError(f"{run_dir / RUN_JSON}: not valid JSON ({err})") from None
    scenario = run.get("scenario") or {}
    try:
        slo = SloSpec.from_dict(scenario.get("slo") if isinstance(scenario, Mapping) else None)
    except InputError as err:  # run.json changed by hand: say which file holds the bad limit
        raise InputError(f"{run_dir / RUN_JSON}: scenario.{err}") from None
    slo, slos = class_slos_for(run, slo, slo_overrides)
    scaling = AutoscalingOptions.from_dict(run.get("autoscaling"))
    if autoscaling_overrides:
        o = autoscaling_overrides
        scaling = scaling.with_overrides(o.get("headroom"), o.get("scale_up_s"), o.get("traffic_growth_per_min"))
    samples, unreadable = None, None
    try:
        samples = read_samples(run_dir)
    except (OSError, ValueError) as err:  # the server's metrics are an aside: the requests are still judged
        unreadable = (f"the server's metrics (server_metrics.parquet) could not be read, so the server view is "
                      f"left out: {' '.join(str(err).split())}")
    analysis = analyze(
        read_scalars(run_dir), run, slo, class_slos=slos, server_samples=samples,
        autoscaling=scaling, chunks=arrow_source(lambda: chunk_batches(run_dir)), **options,
    )
    if unreadable:
        analysis.warnings.append(unreadable)
    return analysis

