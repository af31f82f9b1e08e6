"""``loadtest run``: the whole pipeline, preflight -> load -> analyze -> report.

This module only sequences the stages; each stage lives in its own package:
the preflight in :mod:`loadtest.preflight`, the load in
:mod:`loadtest.load.orchestrate`, the analysis in :mod:`loadtest.analysis`,
the reports in :mod:`loadtest.report`. run.json is the typed
:class:`~loadtest.run_record.RunRecord` held by
:class:`~loadtest.run_state.RunState`. The run folder is written as the run
goes (run.json at every level change, records every second), so an
interrupted run can still be analyzed.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any
from datetime import datetime, timezone
from pathlib import Path

from loadtest import __version__
from loadtest.diskfull import FolderGuard, QuietFileHandler, RunFolderFull, full_disk_message
from loadtest.errors import InputError, LoadtestError
from loadtest.paths import output_folder
from loadtest.redact import ScrubbingFormatter
from loadtest.run_record import WarmupRequests
from loadtest.run_state import RunOptions, RunState, initial_record
from loadtest.scenario import Scenario
from loadtest.workload.image_server import serving_images
from loadtest.run_files import REPORT_HTML

__all__ = ["RunOptions", "RunOutcome", "RunState", "check_secret_env", "default_run_dir", "make_run_dir", "run_scenario"]


def default_run_dir(scenario: Scenario, reports_dir: Path) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return reports_dir / f"{scenario.name}-{stamp}"


def make_run_dir(path: Path, arg: str = "--out") -> Path:
    output_folder(path, arg)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{arg} {path}: cannot create the folder: {err.strerror}") from None
    return path


def setup_file_logging(log_file: Path, guard: FolderGuard | None = None) -> None:
    """Send Locust's and our log to a file in the run folder, not the screen.

    On a full disk the file stops quietly (and tells ``guard``) rather than
    printing a traceback per log line.
    """
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


def check_secret_env(scenario: Scenario) -> None:
    """Refuse a key or header variable whose value holds a control character, before any request (exit 2)."""
    problem = scenario.target.env_value_problem()
    if problem:
        raise InputError(problem)


def api_key_for(scenario: Scenario) -> str | None:
    env = scenario.target.api_key_env
    return os.environ.get(env) if env else None


@dataclass
class RunOutcome:
    run_dir: Path
    #: Stopped early (Ctrl-C, SIGTERM): what was measured is kept and analyzed.
    interrupted: bool
    #: The target stopped answering during the run (analysis/target_lost.py): its words, else None.
    target_lost: str | None = None


def run_scenario(scenario: Scenario, options: RunOptions) -> RunOutcome:
    """Run a scenario end to end: the run folder, and whether it was cut short."""
    # Locust patches the standard library for gevent; do it before anything opens sockets
    # (and before the load stage's modules, which import gevent, are imported below).
    import locust  # noqa: F401
    from rich.console import Console

    from loadtest.load.fdlimit import check_file_descriptors
    from loadtest.load.stopping import quiet_interrupts
    from loadtest.redact import install_for
    from loadtest.workload import prepare

    check_secret_env(scenario)  # the commands check it first; this is for every other caller
    quiet_interrupts()  # a Ctrl-C in the preflight is the CLI's one line, not also gevent's two

    prepare(scenario)  # a bad dataset or trace is one line and exit 2, before any folder or load
    console = Console(stderr=True, soft_wrap=True)
    target = scenario.target
    install_for(target, scenario.request_bodies())  # from here on, every file and line this process writes is scrubbed
    api_key = api_key_for(scenario)
    if target.api_key_env and not api_key:
        console.print(f"[yellow]warning:[/] ${target.api_key_env} is not set; sending no API key")
    for header, env in target.headers_env.items():
        if env not in os.environ:
            console.print(f"[yellow]warning:[/] ${env} is not set; sending no {header} header")

    note = check_file_descriptors(scenario, options)  # before any folder or load
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
    # After run_scenario's 'import locust' (gevent's patches first). The load stage's, the analysis'
    # and the report's stacks (pandas, pyarrow, plotly) load below, once the scraper is starting.
    from loadtest.load.stopping import signals_before_the_load
    from loadtest.preflight import describe_adaptation, failed_warmup_words, preflight, warm_up

    target = scenario.target
    state = RunState(run_dir, initial_record(scenario, options), guard=guard)
    setup_file_logging(run_dir / "locust.log", guard)
    state.save()
    if guard.full:  # not even room to start: say so before any load is sent
        raise RunFolderFull(f"{run_dir}: {full_disk_message(guard.error, run_dir)}; no load was sent")

    # 1. preflight: one request first (and the body adapted to what the target accepts), then the warm-up
    console.print(f"loadtest {__version__}: {scenario.name} against {target.base_url} ({target.model}); writing {run_dir}")
    salt = state.record.prompt_salt
    with signals_before_the_load(state.record, state.save):  # a stop now is in run.json too
        try:
            pre = preflight(scenario, api_key, salt)
        except LoadtestError as err:  # the folder says why it holds no load (history skips it, analyze says so)
            state.record.stopped_by, state.record.stop_error = "preflight", " ".join(str(err).split())
            state.save()
            raise
        for change in pre.adaptations:
            console.print(describe_adaptation(change))
        # Started before the warm-up so that its own start-up (an interpreter, imports) is over
        # before the first level is measured.
        scraper = _start_scraper(scenario, run_dir)
        try:
            # Start-up time: about half a second of imports, which run while the scraper's
            # interpreter starts on the other core instead of before it (its first round is awaited
            # below); nothing of them is needed before the warm-up.
            from loadtest.after_load import after_load
            from loadtest.analysis import analyze_run
            from loadtest.load.orchestrate import release_signals, run_load, web_control
            from loadtest.load.user import UserSettings
            from loadtest.report import write_reports
            from loadtest.report.terminal import print_summary, stdout_console

            warm = warm_up(scenario, api_key, pre.dialect, salt)
            if scraper is not None:
                waited = scraper.wait_first_round()  # the first level's window then has its scrapes
                if (late := scraper.first_round_warning(waited)) is not None:
                    console.print(f"[yellow]warning:[/] {late}")
        except BaseException:
            if scraper is not None:
                scraper.stop()  # the run ends here: no levels, so no scrape health to record
            raise
    state.record.preflight = pre.to_record()
    if scenario.hardware is not None and state.record.model_meta is None:
        # the roofline's model size: what the server tells (llama.cpp's /v1/models meta) where the
        # scenario's model: does not (a run read "declare hardware: and model:" with both declared)
        from loadtest.server_facts import read_server_facts  # urllib: only for a roofline run

        state.record.model_meta = {k: v for k, v in read_server_facts(scenario.target).items()
                                   if k in ("n_params", "size", "n_ctx_train")} or None
    state.record.warmup_requests = WarmupRequests(sent=len(warm), failed=sum(1 for r in warm if not r.ok))
    console.print(
        f"preflight ok: {_first_answer(pre)}, tokens from {pre.token_source}; {len(warm)} warm-up requests sent"
    )
    if (warm_failed := failed_warmup_words(warm)) is not None:
        console.print(warm_failed, markup=False)

    # 2. load
    settings = UserSettings(
        continuous_usage=pre.dialect.continuous_usage, drop=pre.dialect.drop,
        max_tokens_field=pre.dialect.max_tokens_field, salt=salt,
    )
    web = web_control(scenario, options, state)
    try:
        with serving_images(scenario):  # dataset.images_as served: the image files on 127.0.0.1 during the load
            interrupted = run_load(scenario, options, state, settings, console, scraper, web)
        if guard.full:
            raise _folder_full(guard, run_dir)
        if interrupted:
            console.print(f"[yellow]run interrupted[/]; the records measured so far are kept in {run_dir}")
        else:  # a run that ended on requests the target answered nothing to asks once more (after_load.py)
            state.record.after_load = after_load(run_dir, scenario, api_key, pre.dialect, salt)
            if state.record.after_load is not None:
                state.save()

        # 3. analyze, 4. report
        analysis = analyze_run(run_dir)
        write_reports(run_dir, analysis)
        (options.summary_printer or print_summary)(analysis, stdout_console())
        console.print(f"report: {run_dir / 'report.html'}")
        if web is not None:
            web.finished(run_dir / REPORT_HTML, analysis.capacity.message)
            if options.web_linger_s > 0:
                console.print(
                    f"web UI: the report is at {web.url}loadtest/report for {options.web_linger_s:g} s "
                    "(Stop in the UI or Ctrl-C ends it now)"
                )
            web.linger(options.web_linger_s)
    finally:
        if web is not None:
            web.close()
        release_signals()  # the next run in this process (--warmup-run, --repeat) starts as the first did
    return RunOutcome(run_dir, interrupted, analysis.target_lost.words() if analysis.target_lost is not None else None)


def _start_scraper(scenario: Scenario, run_dir: Path) -> Any:
    """The server-metrics scraper (a child process), unless the scenario turned it off."""
    # after run_scenario's 'import locust': the parent's pipes and waits are gevent's from the start
    from loadtest.analysis.signals import KNOWN_SIGNALS
    from loadtest.scrape.process import ScraperProcess

    if not scenario.target.metrics.enabled:
        return None
    return ScraperProcess(scenario.target, run_dir, [s.metric for s in KNOWN_SIGNALS]).start()


def _folder_full(guard: FolderGuard, run_dir: Path) -> RunFolderFull:
    """The one line for a run stopped by a full disk: what failed, and what is kept."""
    from loadtest.records import count_records  # pandas and pyarrow: only on this rare path

    try:
        kept = f"the {count_records(run_dir)} records flushed before are kept there"
    except Exception:  # noqa: BLE001 - counting must not hide the real error
        kept = "the records flushed before are kept there"
    assert guard.error is not None
    return RunFolderFull(
        f"{run_dir}: {full_disk_message(guard.error, run_dir)}; the load was stopped and {kept} "
        f"(free some space, then run: loadtest analyze {run_dir})"
    )


def _first_answer(pre: Any) -> str:
    """TTFT of the preflight's stream; for an answer that is not streamed (embeddings), its e2e."""
    if pre.ttft_ms == pre.ttft_ms:
        return f"TTFT {pre.ttft_ms:.1f} ms"
    return f"e2e {pre.record.e2e_ms:.1f} ms (not streamed)"
