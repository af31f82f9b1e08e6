"""``loadtest run``: the whole pipeline, scenario -> load -> records -> analysis -> report.

This module only sequences the stages; each stage lives in its own package.
The run folder is written as the run goes (run.json at every level change,
records every second), so an interrupted run can still be analyzed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import yaml

from loadtest import __version__
from loadtest.diskfull import FolderGuard, RunFolderFull, full_disk_message, is_disk_full
from loadtest.errors import InputError
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


@dataclass
class RunState:
    """What run.json says about the run so far."""

    run_dir: Path
    meta: dict[str, Any] = field(default_factory=dict)
    spans: list = field(default_factory=list)
    #: Told when a save fails on a full disk (which stops the run) instead of raising mid-load.
    guard: FolderGuard | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.meta, "levels": [s.to_json() for s in self.spans]}

    def save(self) -> None:
        from loadtest.records import write_run_json

        try:
            write_run_json(self.run_dir, self.to_json())
        except OSError as err:
            if self.guard is None or not is_disk_full(err):
                raise
            self.guard.failed(err)


def default_run_dir(scenario: Scenario, reports_dir: Path) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return reports_dir / f"{scenario.name}-{stamp}"


def make_run_dir(path: Path, arg: str = "--out") -> Path:
    from loadtest.paths import output_folder

    output_folder(path, arg)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{arg} {path}: cannot create the folder: {err.strerror}") from None
    return path


def host_facts() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count(), "platform": platform.platform()}


def setup_file_logging(log_file: Path, guard: FolderGuard | None = None) -> None:
    """Send Locust's and our log to a file in the run folder, not the screen.

    On a full disk the file stops quietly (and tells ``guard``) rather than
    printing a traceback per log line.
    """
    import logging

    from loadtest.diskfull import QuietFileHandler
    from loadtest.redact import ScrubbingFormatter

    handler = QuietFileHandler(log_file, guard)
    handler.setFormatter(ScrubbingFormatter("[%(asctime)s] %(levelname)s/%(name)s: %(message)s"))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for name in ("locust", "locust.stats_logger"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False


def initial_meta(scenario: Scenario, options: RunOptions | None = None) -> dict[str, Any]:
    from importlib.metadata import version  # not 'import locust': that monkey-patches the process

    from loadtest.analysis.decide import LookSchedule
    from loadtest.fingerprint import fingerprint
    from loadtest.redact import public_url
    from loadtest.workload import prepare, workload_fingerprint

    t = scenario.target
    load = scenario.load
    schedule = LookSchedule(load.min_duration_s, load.level_duration_s, load.max_duration_s)
    return {
        "server_metrics": {
            "enabled": t.metrics.enabled,
            "url": public_url(t.metrics_url) if t.metrics.enabled else None,
            "interval_s": t.metrics.interval_s,
            "signals": list(t.metrics.signals),
        },
        "autoscaling": dict(options.autoscaling) if options else {},
        "cost_options": dict(options.cost) if options else {},
        # a warm-up run (--warmup-run): compare --history and history leave it out
        "warmup_run": bool(options and options.warmup_run),
        "format": 1,
        "name": scenario.name,
        "tool_version": __version__,
        "python": platform.python_version(),
        "locust": version("locust"),
        "host": host_facts(),
        "target": {"base_url": public_url(t.base_url), "model": t.model, "api": t.api},
        "scenario": scenario.public_dict(),
        # What `loadtest compare` requires to be equal (dataset hashes taken now, while the files are here).
        # Its own key: "workload_fingerprint" below is the workload's datasets-and-classes record.
        "compare_fingerprint": fingerprint(scenario.public_dict()),
        "warmup_s": scenario.load.warmup_s,
        # each level is looked at on this schedule, each look at this confidence (analysis/decide.py)
        "looks_s": schedule.looks,
        "verdict_confidence": schedule.confidence,
        # mixed into every prompt's nonce: no two runs share a prompt prefix (workload.cache_bust)
        "prompt_salt": new_salt() if scenario.workload.cache_bust else "",
        # closed loop (concurrency levels) or open loop (rate levels, load/open_loop.py)
        "load_mode": "open_loop" if load.open_loop else "closed_loop",
        "started_wall": time.time(),
        "ended_wall": None,
        "complete": False,
        "mode": "local",
        "workers": ["local"],
        "workers_lost": [],
        # Datasets read (path, format, sha256, rows) and what makes workloads comparable.
        "datasets": prepare(scenario),
        "workload_fingerprint": workload_fingerprint(scenario),
    }


def new_salt() -> str:
    """A fresh random salt per run (never seeded: its whole point is to differ between runs)."""
    return secrets.token_hex(4)


def api_key_for(scenario: Scenario) -> str | None:
    env = scenario.target.api_key_env
    return os.environ.get(env) if env else None


@dataclass
class RunOutcome:
    run_dir: Path
    #: Stopped early (Ctrl-C, SIGTERM): what was measured is kept and analyzed.
    interrupted: bool


def run_scenario(scenario: Scenario, options: RunOptions) -> RunOutcome:
    """Run a scenario end to end: the run folder, and whether it was cut short."""
    # Locust patches the standard library for gevent; do it before anything opens sockets.
    import locust  # noqa: F401
    from rich.console import Console

    from loadtest.redact import install_for
    from loadtest.workload import prepare

    prepare(scenario)  # a bad dataset is one line and exit 2, before any folder or load
    console = Console(stderr=True, soft_wrap=True)
    target = scenario.target
    install_for(target, scenario.request_bodies())  # from here on, every file and line this process writes is scrubbed
    api_key = api_key_for(scenario)
    if target.api_key_env and not api_key:
        console.print(f"[yellow]warning:[/] ${target.api_key_env} is not set; sending no API key")
    for header, env in target.headers_env.items():
        if env not in os.environ:
            console.print(f"[yellow]warning:[/] ${env} is not set; sending no {header} header")

    note = _check_file_descriptors(scenario, options)  # before any folder or load
    if note:
        console.print(note)
    run_dir = make_run_dir(options.out or default_run_dir(scenario, options.reports_dir),
                           "--out" if options.out else "the run folder")
    guard = FolderGuard(run_dir)
    guard.make_reserve()
    try:
        return _run_in_folder(scenario, options, run_dir, guard, console, api_key)
    finally:
        guard.release_reserve()


def _run_in_folder(scenario: Scenario, options: RunOptions, run_dir: Path, guard: FolderGuard, console, api_key) -> RunOutcome:
    """Preflight, load, analysis and reports, in a run folder that exists."""
    from rich.console import Console

    from loadtest.analysis import analyze_run
    from loadtest.client.preflight import describe_adaptation, preflight, warm_up
    from loadtest.load.user import UserSettings
    from loadtest.report import write_reports
    from loadtest.report.terminal import print_summary

    target = scenario.target
    state = RunState(run_dir, initial_meta(scenario, options), guard=guard)
    setup_file_logging(run_dir / "locust.log", guard)
    state.save()
    if guard.full:  # not even room to start: say so before any load is sent
        raise RunFolderFull(f"{run_dir}: {full_disk_message(guard.error, run_dir)}; no load was sent")

    console.print(f"loadtest {__version__}: {scenario.name} against {target.base_url} ({target.model}); writing {run_dir}")
    salt = state.meta["prompt_salt"]
    pre = preflight(scenario, api_key, salt)
    for change in pre.adaptations:
        console.print(describe_adaptation(change))
    # Started before the warm-up so that its own start-up (an interpreter, imports) is over
    # before the first level is measured.
    scraper = _start_scraper(scenario, run_dir)
    try:
        warm = warm_up(scenario, api_key, pre.dialect, salt)
    except BaseException:
        _stop_scraper(scraper, state)
        raise
    state.meta["preflight"] = {
        "ttft_ms": round(pre.ttft_ms, 3),
        "token_source": pre.token_source,
        "continuous_usage": pre.continuous_usage,
        "attempts": pre.attempts,
        "dropped_fields": list(pre.dialect.drop),
        "max_tokens_field": pre.dialect.max_tokens_field,
        "adaptations": pre.adaptations,
    }
    state.meta["warmup_requests"] = {"sent": len(warm), "failed": sum(1 for r in warm if not r.ok)}
    console.print(
        f"preflight ok: TTFT {pre.ttft_ms:.1f} ms, tokens from {pre.token_source}; {len(warm)} warm-up requests sent"
    )

    settings = UserSettings(
        continuous_usage=pre.dialect.continuous_usage, drop=pre.dialect.drop,
        max_tokens_field=pre.dialect.max_tokens_field, salt=salt,
    )
    web = _web_control(scenario, options, state)
    try:
        interrupted = _run_load(scenario, options, state, settings, console, scraper, web)
        if guard.full:
            raise _folder_full(guard, run_dir)
        if interrupted:
            console.print(f"[yellow]run interrupted[/]; the records measured so far are kept in {run_dir}")

        analysis = analyze_run(run_dir)
        write_reports(run_dir, analysis)
        print_summary(analysis, console=Console(soft_wrap=True, width=None if sys.stdout.isatty() else 120))
        console.print(f"report: {run_dir / 'report.html'}")
        if web is not None:
            web.finished(run_dir / "report.html", analysis.capacity.message)
            if options.web_linger_s > 0:
                console.print(
                    f"web UI: the report is at {web.url}loadtest/report for {options.web_linger_s:g} s "
                    "(Stop in the UI or Ctrl-C ends it now)"
                )
            web.linger(options.web_linger_s)
    finally:
        if web is not None:
            web.close()
    return RunOutcome(run_dir, interrupted)


def _check_file_descriptors(scenario: Scenario, options: RunOptions) -> str | None:
    """A connection per user must fit under the open-file limit of the process that holds it.

    Local workers inherit this process's (possibly raised) limit, so it is checked
    here for the busiest worker's share; remote workers check their own share when
    the master tells them the number of workers.
    """
    from loadtest.load.fdlimit import ensure_fds, users_per_process

    load = scenario.load
    users = load.max_in_flight if load.open_loop else max(load.concurrency_levels())
    if options.master:
        return ensure_fds(0, "the master")
    if options.workers:
        n = (os.cpu_count() or 1) if options.workers < 0 else options.workers
        return ensure_fds(users_per_process(users, n), f"each of the {n} worker processes")
    return ensure_fds(users)


def _folder_full(guard: FolderGuard, run_dir: Path) -> RunFolderFull:
    """The one line for a run stopped by a full disk: what failed, and what is kept."""
    from loadtest.records import count_records

    try:
        kept = f"the {count_records(run_dir)} records flushed before are kept there"
    except Exception:  # noqa: BLE001 - counting must not hide the real error
        kept = "the records flushed before are kept there"
    assert guard.error is not None
    return RunFolderFull(
        f"{run_dir}: {full_disk_message(guard.error, run_dir)}; the load was stopped and {kept} "
        f"(free some space, then run: loadtest analyze {run_dir})"
    )


def _web_control(scenario: Scenario, options: RunOptions, state: RunState):
    """The ``--web`` controller (attached to the session once it exists), or None."""
    if not options.web:
        return None
    from loadtest.load.progress import RunProgress
    from loadtest.load.webui import WebControl

    return WebControl(scenario, state.spans, RunProgress(), host=options.web_host, port=options.web_port)


def _run_load(scenario: Scenario, options: RunOptions, state: RunState, settings, console, scraper=None, web=None) -> bool:
    """Drive Locust through the levels (and the refine probes); return True if interrupted."""
    from loadtest.load.levels import LevelClock
    from loadtest.load.live import LiveView
    from loadtest.load.monitor import SelfMonitor
    from loadtest.load.progress import RunProgress
    from loadtest.load.recorder import Recorder
    from loadtest.load.session import LoadSession
    from loadtest.load.sink import RunSink
    from loadtest.records import RequestWriter

    run_dir = state.run_dir
    guard = state.guard or FolderGuard(run_dir)
    writer = RequestWriter(run_dir)
    sink = RunSink(writer, web.progress if web is not None else RunProgress(), guard)
    live_export = _live_export(scenario, options, sink)
    clock = LevelClock(scenario.load.warmup_s)
    recorder = Recorder("local", sink)
    monitor = SelfMonitor.for_scenario(scenario, clock)
    live = LiveView(sink.progress, console, looks=state.meta["looks_s"])

    def on_level_change(previous, current) -> None:
        if live_export is not None:
            live_export.metrics.level_changed(previous, current)
        if previous is not None:
            recorder.flush()
            live.level_ended(previous.index, previous.decision)
            if web is not None:
                web.level_ended(previous.index)
        if current is not None:
            state.spans.append(current)
            live.level_started(current.index, current.concurrency, current.refine)
        state.save()

    workers: list[subprocess.Popen] = []
    distributed = options.workers != 0 or options.master
    if distributed:
        session, workers = _start_master(scenario, options, state, clock, recorder, monitor, settings, sink, on_level_change, console)
    else:
        session = LoadSession(scenario, clock, recorder, monitor, settings, on_level_change)
    session.decide = _level_judge(scenario, state, recorder, sink)
    if live_export is not None:
        live_export.metrics.users = lambda: session.runner.user_count
    session.in_flight = _in_flight_reader(recorder, sink)
    _stop_on_signals(session)
    _stop_when_full(session, guard)
    recorder.start()
    monitor.start()
    interrupted = False
    try:
        if web is not None and not _wait_for_web_start(web, session, console):
            return True  # stopped before it began: the finally block still closes the run folder
        live.start()
        load = scenario.load
        first = load.rate_levels() if load.open_loop else load.concurrency_levels()
        session.run_levels(first, first_index=0, stop_on_fail=True)
        if options.refine and not session.stop_requested.is_set():
            _refine(session, state, recorder, sink, options.rate_resolution if load.open_loop else None, load.open_loop)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        interrupted = interrupted or session.stop_requested.is_set()
        if web is not None:
            web.analyzing()
        session.close()
        session.decide.close()
        _stop_scraper(scraper, state)
        live.stop()
        monitor.stop()
        recorder.stop()
        _stop_workers(workers)
        sink.drain()
        _close_records(writer, guard)
        if live_export is not None:
            live_export.close()
        state.meta["keepalive_resends"] = _count_resends(run_dir)
        if distributed:
            state.meta["workers"] = session.worker_ids
            state.meta["workers_lost"] = session.workers_lost
        state.meta["ended_wall"] = time.time()
        state.meta["complete"] = not interrupted and not guard.full
        if guard.full:
            state.meta["stopped_by"] = "disk_full"
            state.meta["stop_error"] = full_disk_message(guard.error, run_dir)
        guard.release_reserve()  # room for this last run.json on a full disk
        state.save()
    return interrupted


def _live_export(scenario: Scenario, options: RunOptions, sink):
    if options.metrics_port is None:
        return None
    from loadtest.export.serve import LiveExport

    export = LiveExport(scenario.name, options.metrics_host, options.metrics_port)
    export.attach(sink)
    return export


def _close_records(writer, guard: FolderGuard) -> None:
    """Merge the part files into requests.parquet, unless the disk is full.

    The merge needs as much room again as the parts; on a full disk the parts
    stay as they are (``read_requests`` and ``loadtest analyze`` read them).
    """
    if guard.full:
        return
    try:
        writer.close()
    except OSError as err:
        if not is_disk_full(err):
            raise
        guard.failed(err)


def _stop_when_full(session, guard: FolderGuard) -> None:
    """A full run folder stops the load, like Ctrl-C (the writer runs in a thread: hand over safely)."""
    import gevent

    loop = gevent.get_hub().loop
    guard.on_full(lambda: loop.run_callback_threadsafe(session.stop_requested.set))


def _wait_for_web_start(web, session, console) -> bool:
    """Serve the web UI and wait for its Start button; False if stopped (UI, Ctrl-C) first."""
    try:
        web.attach(session)
    except OSError as err:
        raise InputError(f"--web-port {web.port}: cannot serve the web UI on {web.host}: {err.strerror or err}") from None
    console.print(f"web UI: {web.url} (press Start to run the scenario's levels; Stop ends the run like Ctrl-C)")
    return web.wait_for_start(session.stop_requested)


def _count_resends(run_dir: Path) -> int:
    """Requests resent on a fresh connection after a stale keep-alive one (not failures)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from loadtest.records import REQUESTS_PARQUET

    try:  # one column, not the whole (possibly large) file
        column = pq.read_table(run_dir / REQUESTS_PARQUET, columns=["resends"]).column("resends")
    except Exception:  # noqa: BLE001 - a count for run.json must never cost the run
        return 0
    return int(pc.sum(column).as_py() or 0)


def _start_scraper(scenario: Scenario, run_dir: Path):
    """The server-metrics scraper (a child process), unless the scenario turned it off."""
    if not scenario.target.metrics.enabled:
        return None
    from loadtest.scrape.process import ScraperProcess

    return ScraperProcess(scenario.target, run_dir).start()


def _stop_scraper(scraper, state: RunState) -> None:
    """Stop the scraper and record its health per level in run.json (never fails the run)."""
    if scraper is None:
        return
    scraper.stop()
    try:
        from loadtest.analysis.server import scrape_health
        from loadtest.scrape.store import read_samples

        samples = read_samples(state.run_dir)
        if samples is None:
            return
        spans = [(s.index, s.start_wall, s.end_wall or time.time()) for s in state.spans]
        per_level, total = scrape_health(samples, spans)
        state.meta["server_metrics"]["health"] = total.to_json()
        state.meta["server_metrics"]["levels"] = [
            {"index": s.index, "concurrency": s.concurrency, **per_level[s.index].to_json()} for s in state.spans
        ]
    except Exception as err:  # a broken metrics file must not cost the run
        state.meta["server_metrics"]["health_error"] = str(err)


def _in_flight_reader(recorder, sink):
    """The requests in flight now, from every process's latest snapshot (local: flushed first)."""

    def read():
        recorder.flush()
        sink.drain()
        return sink.in_flight_frame()

    return read


def _level_judge(scenario: Scenario, state: RunState, recorder, sink):
    """The callback the shape calls at each look: the verdict of the running level so far.

    The records are flushed first; the analysis runs in a child process
    (:mod:`loadtest.load.judge`) so that it holds neither the event loop nor
    the interpreter lock the chunk stamps need; requests in flight (the
    processes' latest snapshots) are passed in as censored requests. Should
    the child fail, a look is judged in a native thread instead.
    """
    import gevent

    from loadtest.analysis.decide import Decision, decide_level
    from loadtest.analysis.slo import SloSpec
    from loadtest.load.judge import JudgeError, JudgeProcess
    from loadtest.records import read_requests

    slo_dict = scenario.public_dict()["slo"]
    slo = SloSpec.from_dict(slo_dict)
    confidence = float(state.meta["verdict_confidence"])
    log = logging.getLogger(__name__)
    read_in_flight = _in_flight_reader(recorder, sink)
    child: list[JudgeProcess | None] = [None]
    try:
        child[0] = JudgeProcess(state.run_dir, slo_dict, confidence)
    except OSError as err:
        log.warning("could not start the judge process (%s); levels are judged in a thread", err)

    def in_thread(span, run, in_flight) -> Decision:
        def work():
            frame = in_flight if len(in_flight) else None
            now = span.looked_at or time.time()
            return decide_level(read_requests(state.run_dir), run, slo, span.to_json(), now, confidence, frame)

        return gevent.get_hub().threadpool.apply(work)

    def judge(span):
        in_flight = read_in_flight()
        run = state.to_json()
        try:
            if child[0] is not None:
                try:
                    columns = in_flight.to_dict(orient="list") if len(in_flight) else {}
                    return child[0].decide(run, span.to_json(), span.looked_at or time.time(), columns)
                except JudgeError as err:
                    log.warning("the judge process failed (%s); judging in a thread from now on", err)
                    child[0].close()
                    child[0] = None
            return in_thread(span, run, in_flight)
        except Exception as err:  # a bug in judging must not stop the run: the level runs its full course
            log.exception("could not judge level %s", span.index)
            return Decision("uncertain", f"could not judge the level ({type(err).__name__}: {err})")

    judge.close = lambda: child[0] is not None and child[0].close()  # type: ignore[attr-defined]
    return judge


def _start_master(scenario, options, state, clock, recorder, monitor, settings, sink, on_level_change, console):
    """Start the master session, spawn local workers if asked, and wait for them."""
    from loadtest.load.distributed import MasterSession

    n_local = (os.cpu_count() or 1) if options.workers < 0 else options.workers
    local = n_local > 0
    bind_host = "127.0.0.1" if local else options.master_bind_host
    bind_port = _free_port() if local else options.master_bind_port
    expected = n_local if local else options.expect_workers
    session = MasterSession(
        scenario, clock, recorder, monitor, settings, on_level_change,
        bind_host=bind_host, bind_port=bind_port, sink=sink, expected_workers=expected,
    )
    state.meta["mode"] = "workers" if local else "master"
    console.print(f"waiting for {expected} worker(s) on {bind_host}:{bind_port}")
    with _private_scenario_file(scenario) as scenario_file:
        workers = _spawn_workers(scenario_file, n_local, bind_port, state.run_dir) if local else []
        try:
            # Once connected, every worker has read the file: it can go.
            session.wait_for_workers(expected, options.worker_timeout_s)
        except BaseException:
            session.close()
            _stop_workers(workers)
            raise
    return session, workers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _private_scenario_file(scenario: Scenario) -> Iterator[str]:
    """The full scenario (headers included) for local workers, readable by us only, then deleted.

    It never goes into the run folder, which must hold no secret.
    """
    fd, path = tempfile.mkstemp(prefix="loadtest-scenario-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(scenario.model_dump(mode="json"), fh)
        yield path
    finally:
        os.unlink(path)


def _spawn_workers(path: str, n: int, port: int, run_dir: Path) -> list[subprocess.Popen]:
    """Start ``n`` local ``loadtest worker`` processes on the scenario file ``path``."""
    from loadtest.load.distributed import PARENT_ENV

    procs = []
    env = {**os.environ, PARENT_ENV: str(os.getpid())}  # they stop the moment this process dies
    for i in range(n):
        log = open(run_dir / f"worker-{i}.log", "w")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "loadtest", "worker", "--master-host", "127.0.0.1", "--master-port", str(port), path],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            )
        )
    return procs


def _stop_workers(procs: list[subprocess.Popen]) -> None:
    """Workers exit when the master quits; anything left after a grace period is killed."""
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


def _refine(session, state: RunState, recorder, sink, rate_resolution: float | None = None, rates: bool = False) -> None:
    """Bisect between the last passing and the first failing level (or rate), one level at a time."""
    from loadtest.analysis import analyze_run, next_refine_level, next_refine_rate

    for _ in range(32):  # bounded: bisection over any sane range ends far sooner
        recorder.flush()
        sink.drain()
        state.save()
        levels = analyze_run(state.run_dir).levels
        level = next_refine_rate(levels, rate_resolution) if rates else next_refine_level(levels)
        if level is None or session.stop_requested.is_set():
            return
        index = max(s.index for s in state.spans) + 1
        session.run_levels([level], first_index=index, refine=True)
        state.save()


def _stop_on_signals(session) -> None:
    """Ctrl-C and SIGTERM end the load gracefully: every record is kept and analyzed.

    The handler only sets an event that the session polls; raising from a signal
    handler would land in gevent's hub, which prints a traceback.
    """
    import gevent

    for signum in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(signum, session.stop_requested.set)
