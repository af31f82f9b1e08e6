"""``loadtest run``: the whole pipeline, scenario -> load -> records -> analysis -> report.

This module only sequences the stages; each stage lives in its own package.
The run folder is written as the run goes (run.json at every level change,
records every second), so an interrupted run can still be analyzed.
"""

from __future__ import annotations

import logging
import os
import platform
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from loadtest import __version__
from loadtest.errors import InputError
from loadtest.scenario import Scenario

log = logging.getLogger("loadtest")


@dataclass
class RunOptions:
    out: Path | None = None
    refine: bool = False
    workers: int = 0
    reports_dir: Path = Path("reports")


@dataclass
class RunState:
    """What run.json says about the run so far."""

    run_dir: Path
    scenario: Scenario
    meta: dict[str, Any] = field(default_factory=dict)
    spans: list = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {**self.meta, "levels": [s.to_json() for s in self.spans]}


def default_run_dir(scenario: Scenario, reports_dir: Path) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return reports_dir / f"{scenario.name}-{stamp}"


def make_run_dir(path: Path) -> Path:
    if path.exists() and any(path.iterdir()):
        raise InputError(f"--out {path}: the folder exists and is not empty; choose another")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out {path}: cannot create the folder: {err.strerror}") from None
    return path


def host_facts() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }


def setup_file_logging(run_dir: Path) -> None:
    """Send Locust's and our log to ``locust.log`` in the run folder, not the screen."""
    handler = logging.FileHandler(run_dir / "locust.log")
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s/%(name)s: %(message)s"))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for name in ("locust", "locust.stats_logger"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False


def run_scenario(scenario: Scenario, options: RunOptions) -> Path:
    """Run a scenario end to end and return the run folder."""
    # Locust patches the standard library for gevent; do it before anything opens sockets.
    import locust  # noqa: F401
    from rich.console import Console

    from loadtest.analysis import analyze_run
    from loadtest.client.preflight import preflight, warm_up
    from loadtest.load.levels import LevelClock
    from loadtest.load.live import LiveView
    from loadtest.load.session import LoadSession
    from loadtest.load.user import UserSettings
    from loadtest.load.monitor import SelfMonitor
    from loadtest.load.recorder import Recorder
    from loadtest.records import RequestWriter, write_run_json
    from loadtest.load.batch import decode_table
    from loadtest.report import write_reports
    from loadtest.report.terminal import print_summary

    console = Console(stderr=True, soft_wrap=True)
    target = scenario.target
    api_key = os.environ.get(target.api_key_env) if target.api_key_env else None
    if target.api_key_env and not api_key:
        console.print(f"[yellow]warning:[/] ${target.api_key_env} is not set; sending no API key")

    run_dir = make_run_dir(options.out or default_run_dir(scenario, options.reports_dir))
    state = RunState(run_dir, scenario)
    state.meta = {
        "format": 1,
        "name": scenario.name,
        "tool_version": __version__,
        "python": platform.python_version(),
        "locust": locust.__version__,
        "host": host_facts(),
        "target": {"base_url": target.base_url, "model": target.model, "api": target.api},
        "scenario": scenario.public_dict(),
        "warmup_s": scenario.load.warmup_s,
        "started_wall": time.time(),
        "ended_wall": None,
        "complete": False,
        "workers": ["local"],
        "workers_lost": [],
    }
    setup_file_logging(run_dir)
    write_run_json(run_dir, state.to_json())

    console.print(f"loadtest {__version__}: {scenario.name} against {target.base_url} ({target.model}); writing {run_dir}")
    pre = preflight(scenario, api_key)
    state.meta["preflight"] = {
        "ttft_ms": round(pre.ttft_ms, 3),
        "token_source": pre.token_source,
        "continuous_usage": pre.continuous_usage,
    }
    warm = warm_up(scenario, api_key, pre.continuous_usage)
    state.meta["warmup_requests"] = {"sent": len(warm), "failed": sum(1 for r in warm if not r.ok)}
    console.print(
        f"preflight ok: TTFT {pre.ttft_ms:.1f} ms, tokens from {pre.token_source}; "
        f"{len(warm)} warm-up requests sent"
    )

    writer = RequestWriter(run_dir)
    clock = LevelClock(scenario.load.warmup_s)
    recorder = Recorder("local", clock, lambda batch: _write_async(writer, decode_table(batch)))
    monitor = SelfMonitor()
    live = LiveView(recorder, console)

    def on_level_change(previous, current) -> None:
        if previous is not None:
            live.level_ended(previous.index)
        if current is not None:
            state.spans.append(current)
        write_run_json(run_dir, state.to_json())

    session = LoadSession(scenario, clock, recorder, monitor, UserSettings(pre.continuous_usage), on_level_change)
    _install_sigterm()
    recorder.start()
    monitor.start()
    live.start()
    interrupted = False
    try:
        session.run_levels(scenario.load.concurrency_levels(), first_index=0)
        if options.refine:
            _refine(session, state, recorder, run_dir)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        session.close()
        live.stop()
        monitor.stop()
        recorder.stop()
        _wait_for_writes()
        writer.close()
        state.meta["ended_wall"] = time.time()
        state.meta["complete"] = not interrupted
        write_run_json(run_dir, state.to_json())
    if interrupted:
        console.print(f"[yellow]run interrupted[/]; {writer.rows_written} records kept in {run_dir}")

    analysis = analyze_run(run_dir)
    write_reports(run_dir, analysis)
    print_summary(analysis, console=Console(soft_wrap=True))
    console.print(f"report: {run_dir / 'report.html'}")
    return run_dir


def _refine(session, state: RunState, recorder, run_dir: Path) -> None:
    """Bisect between the last passing and the first failing level, one level at a time."""
    from loadtest.analysis import analyze_run, next_refine_level
    from loadtest.records import write_run_json

    for _ in range(32):  # bounded: bisection over any sane range ends far sooner
        recorder.flush()
        _wait_for_writes()
        analysis = analyze_run(run_dir, partial=True)
        level = next_refine_level(analysis)
        if level is None:
            return
        index = max(s.index for s in state.spans) + 1
        session.run_levels([level], first_index=index, refine=True)
        write_run_json(run_dir, state.to_json())


_pending_writes: list = []


def _write_async(writer, table) -> None:
    """Write a part file in gevent's thread pool: an fsync must not stall the event loop."""
    import gevent

    _pending_writes.append(gevent.get_hub().threadpool.spawn(writer.write, table))
    _pending_writes[:] = [w for w in _pending_writes if not w.ready()]


def _wait_for_writes() -> None:
    for w in list(_pending_writes):
        w.get()
    _pending_writes.clear()


def _install_sigterm() -> None:
    """SIGTERM ends the run like Ctrl-C: stop the load, keep every record, analyze."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
