"""A run's options and its state so far: what ``loadtest run`` was asked, and what run.json says.

:class:`RunState` holds the typed :class:`~loadtest.run_record.RunRecord` and
the level spans; :meth:`RunState.save` writes them to run.json (atomically, at
every level change). :func:`initial_record` is the record as the run starts.
"""

from __future__ import annotations

import os
import platform
import secrets
import socket
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

from loadtest import __version__
from loadtest.diskfull import FolderGuard, is_disk_full
from loadtest.run_record import RunRecord, ServerMetrics
from loadtest.scenario import Scenario


@dataclass
class RunOptions:
    out: Path | None = None
    refine: bool = False
    reports_dir: Path = Path("reports")
    #: ``--workers N``: a master plus N worker processes on this machine (-1: one per core).
    workers: int = 0
    #: ``--master``: wait for ``expect_workers`` workers started elsewhere.
    master: bool = False
    expect_workers: int = 1
    master_bind_host: str = "*"
    master_bind_port: int = 5557
    worker_timeout_s: float = 60.0
    #: ``--rate-resolution``: open-loop refine stops when the bracket is this narrow (req/s;
    #: None: 5% of the first failing rate).
    rate_resolution: float | None = None
    #: ``--headroom``/``--scale-up-s``/``--traffic-growth``: kept in run.json for ``analyze``.
    autoscaling: dict[str, Any] = field(default_factory=dict)
    #: ``--usd-per-hour``/``--peak-users``/``--peak-rps``: kept in run.json for the cost (analysis/run_cost.py).
    cost: dict[str, Any] = field(default_factory=dict)
    #: ``--web``: serve Locust's web UI (extended, see load/webui.py); Start begins the levels.
    web: bool = False
    web_host: str = "127.0.0.1"
    web_port: int = 8089
    #: How long the UI stays up after the report is written (Stop or Ctrl-C end it sooner).
    web_linger_s: float = 120.0
    #: ``--metrics-port``: serve the load generator's own Prometheus metrics (loadtest.export.live).
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    #: A warm-up run (``--warmup-run``, see repeats.py): marked in run.json, never compared.
    warmup_run: bool = False
    #: What prints the terminal summary once the run is analyzed: None for the run's own
    #: (report.terminal.print_summary); a profile's sweep prints its own (profile/sweep.py), whose
    #: verdicts are the profile's stopping rule, not a capacity to plan on.
    summary_printer: Callable[[Any, Any], None] | None = None


@dataclass
class RunState:
    """What run.json says about the run so far: the typed record and the level spans."""

    run_dir: Path
    record: RunRecord = field(default_factory=RunRecord)
    spans: list = field(default_factory=list)
    #: Told when a save fails on a full disk (which stops the run) instead of raising mid-load.
    guard: FolderGuard | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.record.to_json(), "levels": [s.to_json() for s in self.spans]}

    def save(self) -> None:
        from loadtest.records import write_run_json  # pandas and pyarrow: only once a run writes

        try:
            write_run_json(self.run_dir, self.to_json())
        except OSError as err:
            if self.guard is None or not is_disk_full(err):
                raise
            self.guard.failed(err)


def host_facts() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count(), "platform": platform.platform()}


def new_salt() -> str:
    """A fresh random salt per run (never seeded: its whole point is to differ between runs)."""
    return secrets.token_hex(4)


def _trace_fingerprint(scenario: Scenario) -> dict | None:
    """run.json's ``trace``: the replayed window (read now: a bad file is one line before any load)."""
    if scenario.workload.trace is None:
        return None
    # the trace reader: only for a trace-replay scenario
    from loadtest.workload.trace import load_trace

    return load_trace(scenario.workload.trace).fingerprint()


def initial_record(scenario: Scenario, options: RunOptions | None = None) -> RunRecord:
    """run.json as the run starts (datasets read and hashed now, while the files are here)."""
    from loadtest.analysis.decide import LookSchedule  # numpy/scipy: not for `loadtest --help`
    from loadtest.fingerprint import fingerprint
    from loadtest.load.modes import load_mode
    from loadtest.redact import public_url
    from loadtest.workload import prepare, workload_fingerprint

    t = scenario.target
    load = scenario.load
    schedule = LookSchedule(load.min_duration_s, load.level_duration_s, load.max_duration_s)
    return RunRecord(
        server_metrics=ServerMetrics(
            enabled=t.metrics.enabled,
            # the single URL's; with urls or prometheus they are listed below instead
            url=public_url(t.metrics_url) if t.metrics.enabled and not (t.metrics.urls or t.metrics.prometheus) else None,
            urls=[public_url(u) for u in t.metrics.urls] if t.metrics.enabled else [],
            prometheus=(
                {**t.metrics.prometheus.model_dump(), "url": public_url(t.metrics.prometheus.url)}
                if t.metrics.enabled and t.metrics.prometheus else None
            ),
            interval_s=t.metrics.interval_s,
            signals=list(t.metrics.signals),
        ),
        autoscaling=dict(options.autoscaling) if options else {},
        cost_options=dict(options.cost) if options else {},
        warmup_run=bool(options and options.warmup_run),
        name=scenario.name,
        tool_version=__version__,
        python=platform.python_version(),
        locust=version("locust"),  # package metadata, not 'import locust': that monkey-patches the process
        host=host_facts(),
        target={"base_url": public_url(t.base_url), "model": t.model, "api": t.api,
                **({"replicas": t.replicas} if t.replicas else {})},
        scenario=scenario.public_dict(),
        # What `loadtest compare` requires to be equal (dataset hashes taken now). Its own key:
        # workload_fingerprint is the workload's datasets-and-classes record.
        compare_fingerprint=fingerprint(scenario.public_dict()),
        warmup_s=scenario.load.warmup_s,
        looks_s=schedule.looks,
        verdict_confidence=schedule.confidence,
        prompt_salt=new_salt() if scenario.workload.cache_bust else "",
        load_mode=load_mode(scenario).name,
        started_wall=time.time(),
        ended_wall=None,
        complete=False,
        mode="local",
        workers=["local"],
        workers_lost=[],
        datasets=prepare(scenario),
        trace=_trace_fingerprint(scenario),
        workload_fingerprint=workload_fingerprint(scenario),
    )
