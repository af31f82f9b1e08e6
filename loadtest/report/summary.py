"""``summary.json``: the machine-readable result of a run, the interface for CI and ``compare``.

Stable keys (others may be added, never renamed):

* ``capacity``: ``concurrency`` (int or null: the highest level such that every
  level up to it passes), ``upper_bound`` (counting undecided levels as holding),
  ``verdict``, ``message``, ``first_failing``, ``binding`` (e.g. ``"itl_ms.p95"``),
  ``binding_value``, ``binding_limit``, ``binding_ratio``, throughput and goodput at capacity;
* ``levels[]`` sorted by concurrency, each with its metrics
  (``{p50, p90, p95, p99, mean, max, n, n_failed, ci}``), rates, errors and
  ``checks`` (``name, value, ci, limit, verdict, n, low_n``);
* ``slo``, ``target``, ``name``, ``token_source``, ``itl_unit``, ``warnings``,
  ``definitions``;
* ``levels[].server`` (per known signal ``{p50, p95, max, n, role, server}``; for a fleet
  the fleet figure, and ``replicas[]`` with each replica's), ``levels[].imbalance``,
  ``target.replicas``, ``capacity.per_replica`` (see report/fleet_summary.py),
  ``server_metrics`` (url, signals, scrape health overall and per level) and
  ``autoscaling`` (``signals[]`` with ``metric, at_capacity, at_first_failing,
  threshold, basis, basis_value, why``; ``target_concurrency_per_replica``; ``best``; ``headroom``);
* with request classes: ``levels[].classes[name]`` (the same level keys for
  that class alone, judged by its SLO), ``checks[].class``,
  ``capacity.binding_class``, ``capacity.classes[name]`` (each class's own
  capacity) and ``classes[name].slo``; with conversations,
  ``levels[].ttft_by_turn["1"]``; ``prompt_token_source`` and ``datasets``;
* ``decode_fit`` (the two-segment fit of ITL against concurrency, see
  analysis/decode_fit.py, with its ``sentence``), ``levels[].bound``
  (``bound``: memory | compute | overhead, ``basis``: roofline | fit, and with
  ``hardware:``/``model:`` the floors, efficiency and achieved GB/s and TFLOPS)
  and ``cost`` (with a price: $ per million output tokens / tokens and per
  thousand requests on goodput at capacity, and the ``forecast``);
* ``fingerprint``: the workload fingerprint that ``loadtest compare`` matches
  (API, length distributions, dataset hashes, levels, level duration, warm-up,
  and its ``hash``).

Strict JSON: NaN ("no data") and infinity ("failures dominate this
percentile"; see ``n_failed``) are written as ``null``, and
``json.dumps(allow_nan=False)`` guarantees no bare ``NaN`` slips through.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from loadtest import __version__
from loadtest.analysis.capacity_limit import capacity_limit
from loadtest.analysis.results import REPORTED, Analysis, Capacity, Check, LevelResult, Stats
from loadtest.analysis.run_cost import run_cost
from loadtest.fingerprint import fingerprint_of_run
from loadtest.metric_registry import LATENCY_METRICS
from loadtest.records import replace_text
from loadtest.redact import scrub
from loadtest.report.summary_record import check_summary
from loadtest.report.fleet_summary import level_imbalance, level_reporting, per_replica, target_replicas
from loadtest.report.summary_server import autoscaling_dict, level_server_dict, server_metrics_dict, round_figure
from loadtest.report.summary_definitions import DEFINITIONS
from loadtest.report.why import why
from loadtest.run_files import SUMMARY_JSON

FORMAT = 1

#: A stats block per level for each latency metric (the registry's ``kind == "latency"`` ones).
LATENCY_KEYS = LATENCY_METRICS

def clean(value: Any) -> Any:
    """Recursively convert to JSON-safe Python values (NaN/inf → None, numpy → builtins)."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, np.ndarray):
        return clean(value.tolist())
    return value


def stats_dict(stats: Stats) -> dict[str, Any]:
    out: dict[str, Any] = {p: round_figure(stats.percentile(p)) for p in REPORTED}
    out.update(
        mean=round_figure(stats.mean),
        max=round_figure(stats.max),
        n=stats.n,
        n_failed=stats.n_failed,
        ci={p: [round_figure(lo), round_figure(hi)] for p, (lo, hi) in stats.ci.items()},
    )
    return out


def check_dict(check: Check) -> dict[str, Any]:
    digits = 6 if check.percentile is None else 3
    return {
        "name": check.name,
        "value": round_figure(check.value, digits),
        "ci": [round_figure(check.ci[0], digits), round_figure(check.ci[1], digits)],
        "limit": check.limit,
        "verdict": check.verdict,
        "n": check.n,
        "low_n": check.low_n,
        "ratio": round_figure(check.ratio, 4),
        "reason": check.reason,
        "unbounded": math.isinf(check.value),  # value is null because failures reach the percentile
        "class": check.class_name,  # the request class whose SLO this is; null for the whole level
    }


def level_dict(level: LevelResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "concurrency": level.concurrency,
        "index": level.index,
        "refine": level.refine,
        "status": level.status,
        "passed": level.passed,
        "client_saturated": level.client_saturated,
        # ... only because a verdict sat within a quiet client's timing error of its limit (the gate may still
        # judge a change larger than that error here: compare/client_trust.py)
        "client_near_limit": level.client_near_limit,
        # the host (other processes), not the client, made this level's timing untrustworthy
        "host_contended": level.host_contended,
        "client": level.client,
        # how long the level ran, every look at its verdict, and why it ended (run.json)
        "decision": level.decision,
        "window": {
            "start_wall": level.start_wall,
            "measured_from_wall": level.window_start,
            "end_wall": level.end_wall,
            "seconds": round_figure(level.window_s),
        },
        "requests": level.requests,
        "errors": level.errors,
        "error_rate": round_figure(level.error_rate, 6),
        "error_rate_ci": [round_figure(level.error_rate_ci[0], 6), round_figure(level.error_rate_ci[1], 6)],
        "errors_by_kind": level.errors_by_kind,
        "completed": level.completed,
        "complete": level.complete,
        "spillover": level.spillover,
        "cancelled": level.cancelled,
    }
    for key in LATENCY_KEYS:
        out[key] = stats_dict(level.metric(key))
    out.update(
        requests_per_s=round_figure(level.requests_per_s, 4),
        output_tokens_per_s=round_figure(level.output_tokens_per_s, 2),
        goodput_rps=round_figure(level.goodput_rps, 4),
        # share of valid tool-call / structured outputs among checked successes (null: nothing checked)
        valid_output_rate=round_figure(level.valid_output_rate, 6) if level.valid_output_rate is not None else None,
        valid_output_checked=level.valid_output_checked,
        valid_output_rate_ci=[round_figure(x, 6) for x in level.valid_output_ci] if level.valid_output_ci else None,
        # input side (embeddings' throughput): prompt tokens and inputs of requests that ended ok, per second
        input_tokens_per_s=round_figure(level.input_tokens_per_s, 2) if level.input_tokens_per_s is not None else None,
        items_per_s=round_figure(level.items_per_s, 4) if level.items_per_s is not None else None,
        checks=[check_dict(c) for c in level.checks],
        rate_rps=level.rate_rps,
        speedup=level.speedup,
        prefix_cache=level.prefix_cache,
        open_loop=open_loop_dict(level.open_loop),
    )
    if level.images is not None:  # workload.images: count, bytes, and TTFT by image count
        out["images"] = level.images
    if level.ttft_by_turn:
        out["ttft_by_turn"] = {str(turn): stats_dict(stats) for turn, stats in sorted(level.ttft_by_turn.items())}
    if level.classes:
        out["classes"] = {name: level_dict(class_level) for name, class_level in level.classes.items()}
    return out


def open_loop_dict(stats: dict[str, Any] | None) -> dict[str, Any] | None:
    """``levels[].open_loop``: offered/sent/completed rates, drops, send lag, mean in flight (null in closed loop)."""
    if stats is None:
        return None
    lag = stats["schedule_lag_ms"]
    return {
        "offered_rps": round_figure(stats["offered_rps"], 4),
        "sent_rps": round_figure(stats["sent_rps"], 4),
        "completed_rps": round_figure(stats["completed_rps"], 4),
        "arrivals": stats["arrivals"],
        "sent": stats["sent"],
        "dropped": stats["dropped"],
        "server_kept_up": stats["server_kept_up"],
        # the client's count alone (completions below 90% of the sends they answer), and what the
        # server's waiting gauge read (a legend says so where it stayed 0: analysis/keep_up.py)
        "completions_behind": stats.get("completions_behind", not stats["server_kept_up"]),
        "server_waiting_max": round_figure(stats.get("server_waiting_max"), 4),
        "keep_up_sent_rps": round_figure(stats.get("keep_up_sent_rps"), 4),
        # false: the shifted span was too short (or the sends too few) to tell, and the level is not flagged
        "keep_up_told": stats.get("keep_up_told", True),
        "completed_span_s": round_figure(stats.get("completed_span_s"), 3),
        "completed_shift_s": round_figure(stats.get("completed_shift_s"), 3),
        "schedule_lag_ms": {
            "p50": round_figure(lag["p50"]), "p99": round_figure(lag["p99"]), "max": round_figure(lag["max"]),
            "n": lag["n"], "late": lag["late"], "late_threshold_ms": lag["late_ms"],
        },
        "client_late": stats["client_late"],
        "mean_in_flight": round_figure(stats["mean_in_flight"], 3),
    }


def capacity_dict(cap: Capacity) -> dict[str, Any]:
    return {
        "concurrency": cap.concurrency,
        "verdict": cap.verdict,
        "message": cap.message,
        "first_failing": cap.first_failing,
        "binding": cap.binding,
        "binding_value": round_figure(cap.binding_value, 6),
        "binding_unbounded": cap.binding_value is not None and math.isinf(cap.binding_value),
        "binding_limit": cap.binding_limit,
        "binding_ratio": round_figure(cap.binding_ratio, 4),
        "requests_per_s": round_figure(cap.requests_per_s, 4),
        "output_tokens_per_s": round_figure(cap.output_tokens_per_s, 2),
        "goodput_rps": round_figure(cap.goodput_rps, 4),
        "input_tokens_per_s": round_figure(cap.input_tokens_per_s, 2),
        "items_per_s": round_figure(cap.items_per_s, 4),
        "certain_concurrency": cap.certain_concurrency,
        "upper_bound": cap.upper_bound,
        "max_tested": cap.max_tested,
        "uncertain_levels": cap.uncertain_levels,
        "saturated_levels": cap.saturated_levels,
        "contended_levels": cap.contended_levels,
        # open loop (null in closed loop, where concurrency answers)
        "rate_rps": cap.rate_rps,
        "first_failing_rate_rps": cap.first_failing_rate_rps,
        "upper_bound_rate_rps": cap.upper_bound_rate_rps,
        "max_tested_rate_rps": cap.max_tested_rate_rps,
        "mean_in_flight": round_figure(cap.mean_in_flight, 3),
        # open loop: what the capacity level's window was offered and sent (random arrivals: analysis/offered.py)
        "offered_rate_rps": round_figure(cap.offered_rate_rps, 4),
        "sent_rate_rps": round_figure(cap.sent_rate_rps, 4),
        # trace replay (null otherwise): the capacity as a speedup of the trace window
        "speedup": cap.speedup,
        "first_failing_speedup": cap.first_failing_speedup,
        "upper_bound_speedup": cap.upper_bound_speedup,
        "max_tested_speedup": cap.max_tested_speedup,
        "binding_class": cap.binding_class,
        # the model (or LoRA adapter) that binding class sent to: its model override, else target.model
        "binding_model": cap.binding_model,
        **({"classes": {name: capacity_dict(c) for name, c in cap.classes.items()}} if cap.classes else {}),
    }


def _iso(wall: Any) -> str | None:
    try:
        return datetime.fromtimestamp(float(wall), tz=timezone.utc).isoformat(timespec="seconds")
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def summary_dict(analysis: Analysis) -> dict[str, Any]:
    """The summary as plain JSON-safe data."""
    run = analysis.run
    sources = analysis.token_source
    decode_fit, bounds = why(analysis)
    out = {
        "format": FORMAT,
        "name": analysis.name,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tool_version": __version__,
        "target": {**analysis.target, **target_replicas(analysis)},
        "slo": analysis.slo.to_dict(),
        "capacity": {**capacity_dict(analysis.capacity), "per_replica": per_replica(analysis)},
        "levels": [
            {**level_dict(lv), "server": level_server_dict(analysis, lv), "bound": bounds.get(lv.index),
             "imbalance": level_imbalance(analysis, lv), **level_reporting(analysis, lv)}
            for lv in sorted(analysis.levels, key=lambda lv: lv.concurrency)
        ],
        "decode_fit": decode_fit,
        "capacity_limit": capacity_limit(analysis),
        "target_lost": analysis.target_lost.to_dict() if analysis.target_lost is not None else None,
        "cost": run_cost(analysis),
        "token_source": {
            "primary": max(sources, key=sources.__getitem__) if sources else None,
            "requests": sources,
        },
        "itl_unit": analysis.itl_unit,
        "confidence": analysis.confidence,
        "server_metrics": server_metrics_dict(analysis),
        "autoscaling": autoscaling_dict(analysis),
        "prompt_token_source": analysis.prompt_token_source,
        "prompt_tokens": analysis.prompt_length.to_dict() if analysis.prompt_length is not None else None,
        "classes": {name: {"slo": spec.to_dict()} for name, spec in analysis.class_slos.items()},
        "datasets": run.get("datasets") or [],
        "warnings": list(analysis.warnings),
        "run": {
            "started_at": _iso(run.get("started_wall")),
            "started_wall": run.get("started_wall"),
            "ended_wall": run.get("ended_wall"),
            "complete": run.get("complete"),
            # why an incomplete run stopped, when it could say: "disk_full", "signal", "web_ui" (else null)
            "stopped_by": run.get("stopped_by"),
            # with stopped_by "signal": "SIGINT" or "SIGTERM" (else null)
            "stop_signal": run.get("stop_signal"),
            "warmup_s": analysis.warmup_s,
            "workers": run.get("workers"),
            "workers_lost": run.get("workers_lost"),
            # --refine: how refinement ended, {ended, why, probes, waits} (null without --refine)
            "refine": run.get("refine"),
            "tool_version": run.get("tool_version"),
            "locust": run.get("locust"),
        },
        "definitions": DEFINITIONS,
        "fingerprint": _fingerprint(run),
    }
    return check_summary(clean(out))  # type: ignore[return-value]


def _fingerprint(run: dict[str, Any]) -> dict[str, Any] | None:
    """The workload fingerprint (``loadtest compare``): stored in run.json, or recomputed for older runs."""
    if not run.get("compare_fingerprint") and not run.get("workload_fingerprint") and not isinstance(run.get("scenario"), dict):
        return None
    return fingerprint_of_run(run)


def dumps(analysis: Analysis) -> str:
    return json.dumps(summary_dict(analysis), indent=2, allow_nan=False, ensure_ascii=False)


def write_summary(run_dir: Path | str, analysis: Analysis) -> Path:
    """Write ``summary.json`` atomically into the run folder."""
    path = Path(run_dir) / SUMMARY_JSON
    replace_text(path, scrub(dumps(analysis)) + "\n")  # error messages, URLs: no secret
    return path
