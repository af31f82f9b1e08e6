"""Synthetic run folders for the regression gate's tests, and ``loadtest`` called in-process.

The gate's unit tests (tests/unit/test_compare_*.py, test_changepoints.py) judge runs with known
answers: :func:`write_run` writes a run folder whose latencies grow with concurrency times a
``scale``, so "20% slower" is a fact the gate must find, not a guess. :func:`pair` is the
module-scoped fixture most of them share (3 runs of the same server, one 20% slower, and 2 earlier
runs for the run-to-run noise); a test file binds it by name (``pair = gate_runs.pair``).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from loadtest.cli import main
from loadtest.compare.change import Change
from support.synthetic import T0, closed_loop_rows, level_plan, open_loop_rows, rate_level_plan, write_run_folder

SLO = {"ttft_ms": {"p95": 10_000}, "itl_ms": {"p95": 10_000}, "max_error_rate": 0.5}


def scenario_dict(name="nightly", levels=(1, 2, 4), slo=None, max_tokens=16):
    return {
        "name": name,
        "target": {"base_url": "http://127.0.0.1:8000/v1", "model": "mock-model", "api": "chat"},
        "workload": {"prompt_tokens": {"mean": 64, "stddev": 0}, "max_tokens": max_tokens, "seed": 0},
        "load": {"levels": list(levels), "level_duration_s": 10, "warmup_s": 1, "warmup_requests": 0},
        "slo": slo or SLO,
    }


def write_run(folder: Path, *, scale=1.0, seed=0, t0=T0, jitter=0.03, duration=10.0, itl_per_user=10.0, fail_every=0,
              **scenario):
    """A run folder whose latencies grow with concurrency, times ``scale`` (1.2 = 20% slower);
    every ``fail_every``-th request an HTTP 5xx."""
    sc = scenario_dict(**scenario)
    plan = level_plan(sc["load"]["levels"], duration, t0=t0)
    rows = []
    for lv in plan:
        c = lv["concurrency"]
        rows += closed_loop_rows(lv["index"], c, lv["start_wall"], duration, ttft_ms=40.0 * c * scale,
                                 itl_ms=itl_per_user * c * scale, chunks=16, warmup_s=1.0, seed=seed + 7 * lv["index"],
                                 jitter=jitter, fail_every=fail_every)
    return write_folder(folder, rows, plan, sc)


def rate_scenario_dict(name="nightly-rates", rates=(4, 8, 16), slo=None, speedups=False):
    """An open loop's scenario (``load.rates``), or with ``speedups`` a trace replay's (``load.speedups``)."""
    sc = scenario_dict(name=name, slo=slo)
    sc["load"] = {"speedups" if speedups else "rates": list(rates), "level_duration_s": 10, "warmup_s": 1,
                  "warmup_requests": 0}
    return sc


def write_rate_run(folder: Path, *, scale=1.0, seed=0, t0=T0, jitter=0.03, duration=10.0, hold=2.0, slots=None,
                   trace_rate=None, **scenario) -> Path:
    """An open-loop run folder whose latencies grow with the rate, times ``scale`` (1.2 = 20% slower);
    with ``slots`` its server runs that many requests at once and queues the rest (so it falls behind
    past ``slots / life``); with ``trace_rate`` a trace replay whose levels are speedups of a window
    of that mean rate (``scenario['rates']`` are then the speedups)."""
    speedups = trace_rate is not None
    sc = rate_scenario_dict(speedups=speedups, **scenario)
    loads = sc["load"]["speedups" if speedups else "rates"]
    rates = [x * trace_rate for x in loads] if speedups else loads
    plan = rate_level_plan(rates, duration, hold, t0=t0)
    rows = []
    for lv in plan:
        r = lv["rate_rps"]
        rows += open_loop_rows(lv["index"], r, lv["start_wall"], duration + hold, ttft_ms=(30.0 + 10.0 * r) * scale,
                               itl_ms=(5.0 + 2.0 * r) * scale, chunks=8, slots=slots, warmup_s=1.0,
                               seed=seed + 7 * lv["index"], jitter=jitter)
    extra = {"load_mode": "trace_replay" if speedups else "open_loop", "ended_wall": plan[-1]["hold"]["end_wall"]}
    if speedups:
        extra["trace"] = {"path": "trace.jsonl", "mean_rate_rps": trace_rate, "period_s": 600.0}
    return write_run_folder(folder, rows, plan, sc, **extra)


def write_folder(folder: Path, rows: list, plan: list, sc: dict) -> Path:
    """Records, run.json (with its scenario) and an analysis: a run folder as ``loadtest run`` leaves it."""
    return write_run_folder(folder, rows, plan, sc)


def held_change(check: str, kind: str, level: int, change: float, tolerance: float = 0.05, **extra) -> Change:
    """A gating level check the gate held (inconclusive, may regress), its point ``change``."""
    return Change(check, kind, level, 1.0, 1.0 + change, change, (change - 0.1, change + 0.1), kind != "error_rate",
                  tolerance, "inconclusive", True, True, message=f"{check} at {level} users {change:+.0%}", **extra)


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


#: Earlier runs of the same server, under the pair's folder: with the baseline, the 3 reference runs
#: the gate needs to know the run-to-run noise (without it no speed's change is a regression).
EARLIER = "earlier"


def _nights(root: Path, write, slow_scale: float) -> tuple[Path, Path, Path]:
    """Under ``earlier`` 2 runs of the same server, then the baseline, the same server again and one
    ``slow_scale`` × slower, a day apart each, written by ``write`` (a closed or an open loop)."""
    for i in range(2):
        write(root / EARLIER / f"night-{i}", seed=20 + i, t0=T0 - (2 - i) * 86_400)
    base = write(root / "base", seed=1)
    same = write(root / "same", seed=2, t0=T0 + 86_400)
    slow = write(root / "slow", seed=3, t0=T0 + 2 * 86_400, scale=slow_scale)
    return base, same, slow


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    with contextlib.redirect_stdout(io.StringIO()):
        base, same, slow = _nights(root, write_run, 1.2)
    return root, base, same, slow


def history_of(pair) -> tuple[str, str]:
    """``--history`` with the pair's earlier runs."""
    return "--history", str(pair[0] / EARLIER)


@pytest.fixture(scope="module")
def rate_pair(tmp_path_factory):
    """The open-loop :func:`pair`: under ``earlier`` 2 runs of the same server (with the baseline, the 3
    reference runs the gate needs), the baseline, the same server again, one 30% slower at every rate, and
    one whose server runs only 2 requests at once (it falls behind above ~4 req/s)."""
    root = tmp_path_factory.mktemp("rate_pair")
    with contextlib.redirect_stdout(io.StringIO()):
        base, same, slow = _nights(root, write_rate_run, 1.3)
        behind = write_rate_run(root / "behind", seed=4, t0=T0 + 3 * 86_400, slots=2)
    return root, base, same, slow, behind
