"""The load stage of ``loadtest run``, wired: levels, refine probes, and a clean close.

:func:`run_load` builds the parts of :mod:`loadtest.load` (the record sink and
recorder, the self-monitor, the session or the master with its workers, the
level judge, the live view, the web UI and live export when asked), runs the
mode's levels and the ``--refine`` probes, and closes everything in order so
that every record reaches the run folder however the run ends (done, Ctrl-C,
SIGTERM, a full disk). run.json is saved at every level change and once more
at the end, with how the run ended.

Import this module only after ``import locust``: Locust patches the standard
library for gevent, and that must happen before anything opens a socket.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent
import pyarrow.compute as pc
import pyarrow.parquet as pq

from loadtest.client.unary import UNARY_APIS
from loadtest.analysis import analyze_run
from loadtest.analysis.refine_end import RefineEnd, refine_end
from loadtest.analysis.server import scrape_health
from loadtest.diskfull import FolderGuard, full_disk_message, is_disk_full
from loadtest.errors import InputError
from loadtest.load.judge import LevelJudge
from loadtest.load.levels import LevelClock
from loadtest.load.live import LiveView
from loadtest.load.modes import LoadMode, load_mode
from loadtest.load.monitor import SelfMonitor
from loadtest.load.progress import RunProgress
from loadtest.load.recorder import Recorder
from loadtest.load.session import LoadSession
from loadtest.load.sink import RunSink
from loadtest.load.stopping import signals_before_the_load
from loadtest.load.workers import start_master, stop_workers
from loadtest.records import REQUESTS_PARQUET, RequestWriter
from loadtest.scenario import Scenario
from loadtest.scrape.store import read_samples

if TYPE_CHECKING:  # the pipeline's types; the load stage does not import the pipeline
    from loadtest.run_state import RunOptions, RunState

#: ``--refine``'s probes at most (bisection over any sane range ends far sooner).
MAX_REFINE_PROBES = 32


def web_control(scenario: Scenario, options: RunOptions, state: RunState):
    """The ``--web`` controller (attached to the session once it exists), or None."""
    if not options.web:
        return None
    from loadtest.load.webui import WebControl  # Locust's web UI (Flask): only with --web

    return WebControl(scenario, state.spans, RunProgress(), host=options.web_host, port=options.web_port,
                      trace_rate_rps=(state.record.trace or {}).get("mean_rate_rps"), refine=options.refine)


def run_load(scenario: Scenario, options: RunOptions, state: RunState, settings, console, scraper=None, web=None) -> bool:
    """Drive Locust through the levels (and the refine probes); return True if interrupted."""
    run_dir = state.run_dir
    guard = state.guard or FolderGuard(run_dir)
    mode = load_mode(scenario)
    writer = RequestWriter(run_dir)
    sink = RunSink(writer, web.progress if web is not None else RunProgress(), guard)
    live_export = _live_export(scenario, options, sink)
    clock = LevelClock(scenario.load.warmup_s)
    recorder = Recorder("local", sink)
    monitor = SelfMonitor.for_scenario(scenario, clock)
    # the live figures count a level's requests up to its window's end, as the analysis does
    sink.window_ends = lambda: {span.index: span.end_wall for span in state.spans if span.end_wall is not None}
    # and a level whose look is being judged holds back the rows it started after the look (load/look_rows.py)
    sink.looks_open = lambda: {span.index: span.looked_at for span in state.spans if span.looking}
    trace_rate = (state.record.trace or {}).get("mean_rate_rps")
    live = LiveView(sink.progress, console, looks=state.record.looks_s, unary=scenario.target.api in UNARY_APIS,
                    trace_rate_rps=trace_rate)

    def on_level_change(previous, current) -> None:
        if live_export is not None:
            live_export.metrics.level_changed(previous, current)
        if previous is not None:
            recorder.flush()
        if current is not None:
            state.spans.append(current)
        # the ended level's line (and the web UI's frozen figures) once its last records are counted
        live.level_changed(previous, current, settle=sink.settle, frozen=web.level_ended if web is not None else None)
        state.save()

    workers: list[subprocess.Popen] = []
    distributed = options.workers != 0 or options.master
    # Until the session's own handlers are in (below), a stop is the pre-load one: the wait for workers
    # (pods slow to come) may be long, and a SIGTERM there killed the process with the scraper running.
    with signals_before_the_load(state.record, state.save):
        try:
            if distributed:
                session, workers = start_master(scenario, options, state, clock, recorder, monitor, settings, sink,
                                                on_level_change, console)
            else:
                session = LoadSession(scenario, clock, recorder, monitor, settings, on_level_change)
            in_flight = in_flight_reader(recorder, sink)
            judge = LevelJudge(run_dir, scenario.public_dict()["slo"], float(state.record.verdict_confidence),
                               state.to_json, in_flight)
        except BaseException:
            if scraper is not None:
                scraper.stop()  # no level ran: no scrape health to record (start_master stopped its workers)
            raise
    session.decide = judge
    if live_export is not None:
        live_export.metrics.in_flight = sink.in_flight_count
        # open loop's users are max_in_flight idle senders: a "users" panel shows the requests in flight
        live_export.metrics.users = (lambda: session.runner.user_count) if mode.users_are_the_load else sink.in_flight_count
    session.in_flight = in_flight
    _stop_on_signals(session)
    _stop_when_full(session, guard)
    recorder.start()
    monitor.start()
    interrupted = False
    try:
        if web is not None and not _wait_for_web_start(web, session, console):
            return True  # stopped before it began: the finally block still closes the run folder
        live.start()
        session.run_levels(mode.levels(), first_index=0, stop_on_fail=True, probes=options.refine)
        if options.refine and not session.stop_requested.is_set():
            _refine(session, state, recorder, sink, mode, console, options.rate_resolution)
    except KeyboardInterrupt:
        interrupted = True
        if session.stop_cause is None:
            session.stop_cause = ("signal", "SIGINT")
    finally:
        interrupted = interrupted or session.stop_requested.is_set()
        if web is not None:
            web.analyzing()
        session.close()
        # The judge and the scraper exit on their own once their input closes (an interpreter's
        # teardown each): they end together, while the rest stops, rather than one after the other;
        # the scraper is awaited only once the records are closed, its teardown and merge meanwhile.
        judge.end_input()
        if scraper is not None:
            scraper.end_input()
        live.stop()
        monitor.stop()
        recorder.stop()
        stop_workers(workers)
        sink.close()  # drained, and the record writer process ended
        stop_scraper(scraper, state)
        judge.close()  # ended by now, as a rule
        _close_records(writer, guard)
        if live_export is not None:
            live_export.close()
        record = state.record
        record.keepalive_resends = _count_resends(run_dir)
        if distributed:
            record.workers = session.worker_ids
            record.workers_lost = session.workers_lost
        record.ended_wall = time.time()
        record.complete = not interrupted and not guard.full
        if guard.full:
            record.stopped_by = "disk_full"
            record.stop_error = full_disk_message(guard.error, run_dir)
        elif interrupted and session.stop_cause is not None:
            # an interrupt, not a crash: a reader (and the analysis' words) can tell the two apart
            record.stopped_by, record.stop_signal = session.stop_cause
        guard.release_reserve()  # room for this last run.json on a full disk
        state.save()
    return interrupted


def in_flight_reader(recorder, sink):
    """The requests in flight now, from every process's latest snapshot (local: flushed first)."""

    def read():
        recorder.flush()
        sink.drain()
        return sink.in_flight_frame()

    return read


def stop_scraper(scraper, state: RunState) -> None:
    """Stop the scraper and record its health per level in run.json (never fails the run)."""
    if scraper is None:
        return
    scraper.stop()
    metrics = state.record.server_metrics
    try:
        samples = read_samples(state.run_dir)
        if samples is None:
            return
        spans = [(s.index, s.start_wall, s.end_wall or time.time()) for s in state.spans]
        per_level, total = scrape_health(samples, spans)
        metrics.health = total.to_json()
        metrics.levels = [
            {"index": s.index, "concurrency": s.concurrency, **per_level[s.index].to_json()} for s in state.spans
        ]
    except Exception as err:  # a broken metrics file must not cost the run
        metrics.health_error = str(err)


def _live_export(scenario: Scenario, options: RunOptions, sink):
    if options.metrics_port is None:
        return None
    from loadtest.export.serve import LiveExport  # prometheus_client: only with --metrics-port

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
    try:  # one column, not the whole (possibly large) file
        column = pq.read_table(run_dir / REQUESTS_PARQUET, columns=["resends"]).column("resends")
    except Exception:  # noqa: BLE001 - a count for run.json must never cost the run
        return 0
    return int(pc.sum(column).as_py() or 0)


def _refine(session, state: RunState, recorder, sink, mode: LoadMode, console, rate_resolution: float | None = None) -> None:
    """Bisect between the last passing and the first failing level (users or rate: the mode's), one level at a time.

    How it ended is one line on the terminal and run.json's ``refine``, whatever the reason: a run
    that asked for ``--refine`` and got no probe (an undecided level below the first failure, no
    failure at all) said nothing, which read as "refine did not work" (analysis/refine_end.py).
    """
    end: RefineEnd | None = None
    waits: list[dict[str, Any]] = []
    for _ in range(MAX_REFINE_PROBES):
        recorder.flush()
        sink.drain()
        state.save()
        levels = analyze_run(state.run_dir).levels
        level = mode.next_refine(levels, rate_resolution)
        probes = sum(1 for s in state.spans if s.refine)
        if session.stop_requested.is_set():
            end = RefineEnd("stopped", f"stopped after {probes} probe{'' if probes == 1 else 's'}: the run was stopped", probes)
            break
        if level is None:
            end = refine_end(levels, probes, rate_resolution)
            break
        index = max(s.index for s in state.spans) + 1
        waits.append({"before_index": index, **_settle(session, state, console)})  # the last level's queue first
        session.run_levels([level], first_index=index, refine=True)
        state.save()
    if end is None:
        probes = sum(1 for s in state.spans if s.refine)
        end = RefineEnd("probe_limit", f"stopped at its limit of {MAX_REFINE_PROBES} probes", probes)
    state.record.refine = {**end.to_json(), "waits": waits}
    state.save()
    console.print(end.line())


def _settle(session, state: RunState, console) -> dict[str, Any]:
    """Wait until the server has worked off the last batch's queue (:mod:`loadtest.load.settle`), say so, and
    return run.json's ``refine.waits`` entry (its short requests are the server's work too: a count of
    tokens generated against the records must allow for them)."""
    from loadtest.client.wire import Dialect  # the wire's types: only when a run refines
    from loadtest.load.hold import hold_cap_s
    from loadtest.load.settle import wait_until_idle

    scenario, settings = session.scenario, session.settings
    dialect = Dialect(continuous_usage=settings.continuous_usage, drop=tuple(settings.drop),
                      max_tokens_field=settings.max_tokens_field or scenario.target.max_tokens_field)
    pre = state.record.preflight
    baseline = float(pre.ttft_ms) if pre is not None and pre.ttft_ms is not None else float("nan")
    settled = wait_until_idle(scenario, dialect, settings.salt, baseline, max(10.0, hold_cap_s(scenario.target.timeout_s)),
                              session.stop_requested.is_set)
    line = settled.line()
    if line:
        console.print(line, markup=False)
    return {"waited_s": round(settled.waited_s, 3), "requests": settled.requests, "idle": settled.idle}


#: The signal watchers the load installed (:func:`_stop_on_signals`), until :func:`release_signals`.
_WATCHERS: list[Any] = []


def _stop_on_signals(session) -> None:
    """Ctrl-C and SIGTERM end the load gracefully: every record is kept and analyzed.

    The handler only sets an event that the session polls; raising from a signal
    handler would land in gevent's hub, which prints a traceback.
    """
    for signum in (signal.SIGINT, signal.SIGTERM):
        _WATCHERS.append(gevent.signal_handler(signum, session.request_stop, "signal", signal.Signals(signum).name))


def release_signals() -> None:
    """Give Ctrl-C and SIGTERM back to Python once a run is over (its analysis and report included).

    Why: ``run --baseline`` makes a warm-up run and then the measured one in one process (so does
    ``--repeat``). The first run's watchers stayed; the second's preflight put a Python handler on
    SIGTERM and, leaving it, restored what Python believed was there, the default action, over
    libev's; libev does not reinstall its own for a second watcher on a signal that already has one.
    A SIGTERM during the measured run's load then killed the process (exit 143: no ``stopped_by``,
    the last second of records lost, the scraper and workers left running). With the watchers
    cancelled, each run starts as the first did.
    """
    while _WATCHERS:
        _WATCHERS.pop().cancel()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # libev left the default action
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
