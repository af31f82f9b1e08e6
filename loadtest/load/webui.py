"""``loadtest run --web``: Locust's own web UI, extended through its hooks, drives the run.

No second web server: the UI is the one Locust serves for an
:class:`~locust.env.Environment` (``environment.create_web_ui``), and what we
add goes through the extension points Locust documents (``web_ui.app`` routes,
``template_args`` for extra tabs, ``extended_stats`` added to
``/stats/requests``, as in Locust's ``examples/extend_web_ui.py``):

- a **Levels** tab: every level so far, the one in force and the next, with
  requests, errors, TTFT/ITL percentiles and how each level ended;
- ``/loadtest/levels``: the same as JSON (the data endpoint), with the SLO limits;
- ``/loadtest/charts``: TTFT and ITL percentiles per finished level against the
  SLO lines, refreshed every two seconds (plotly.js served from the plotly package,
  so it works offline); for a kind that is not streamed (embeddings, rerank, score),
  end-to-end latency instead, and a line saying why (:mod:`webui_metrics`);
- ``/loadtest/report``: the run's report.html once it is written.

The scenario still decides the levels. The UI's Start button lets the run
begin; its Stop button sets the session's ``stop_requested`` event, the very
path Ctrl-C takes: the load stops, every record is kept, the analysis and the
report are done, and the exit code is 130. After the run the UI stays up for
``linger_s`` (or until Stop or Ctrl-C) so the report link can be followed.
"""

from __future__ import annotations

import functools
import json
import logging
import signal
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent
import gevent.event
from flask import Response, jsonify, request, send_file
from locust import argument_parser

from loadtest.analysis.decision_reason import look_prefix
from loadtest.analysis.slo import SloSpec
from loadtest.load.live import level_label
from loadtest.load.modes import load_mode
from loadtest.load.shape import SteppedShape
from loadtest.load.webui_metrics import SHOWN_PERCENTILES, WebMetrics, cell_key, web_metrics
from loadtest.load.webui_page import CHARTS_PAGE, plotly_js
from loadtest.report.terminal import describe_ending

if TYPE_CHECKING:
    from loadtest.load.progress import RunProgress
    from loadtest.load.session import LoadSession
    from loadtest.scenario import Scenario

log = logging.getLogger(__name__)

#: A streamed run's metrics (the registry's ``web_ui`` flags): charted, in the JSON and the tab.
STREAMED = web_metrics("chat")
CHART_METRICS = tuple(STREAMED.charts)
LEVEL_TABLE = STREAMED.level_table()
#: The percentiles every metric gets in the JSON (re-exported: the charts page and the tests read them).
__all__ = ["CHART_METRICS", "LEVEL_TABLE", "SHOWN_PERCENTILES", "WebControl", "slo_lines"]
LEVELS_TAB = "loadtest-levels"


def slo_lines(scenario: "Scenario", metrics: tuple[str, ...] = CHART_METRICS) -> dict[str, dict[str, float]]:
    """The SLO limits the charts draw, by metric and percentile (e.g. ``{"itl_ms": {"p95": 50}}``)."""
    spec = SloSpec.from_dict(scenario.public_dict()["slo"])
    lines: dict[str, dict[str, float]] = {}
    for check in spec.checks:
        if check.metric in metrics:
            lines.setdefault(check.metric, {})[check.percentile] = check.limit
    return lines


class WebControl:
    """Locust's web UI for one ``loadtest run``: levels tab, data endpoint, charts, start/stop."""

    def __init__(
        self, scenario: "Scenario", spans: list, progress: "RunProgress", *, host: str = "127.0.0.1", port: int = 8089,
        trace_rate_rps: float | None = None, refine: bool = False,
    ) -> None:
        self.scenario = scenario
        #: ``--refine``: probes may follow the planned levels (the "next" the page shows says so, or not).
        self.refine = refine
        #: The load mode: its levels (users, rates or a trace's speedups) and how a planned one runs.
        self.mode = load_mode(scenario)
        #: Trace replay: the window's mean rate, so a level is named by its speedup, as on the terminal.
        self.trace_rate_rps = trace_rate_rps
        #: The run's level spans (RunState.spans): appended as levels start, closed as they end.
        self.spans = spans
        self.progress = progress
        self.host = host
        self.port = port
        self.planned = self.mode.levels()
        #: What is charted and tabulated: TTFT and ITL, or e2e for a kind that is not streamed.
        self.metrics: WebMetrics = web_metrics(scenario.target.api)
        self.slo = slo_lines(scenario, tuple(self.metrics.charts))
        self.start_requested = gevent.event.Event()
        self.quit_requested = gevent.event.Event()
        self.session: "LoadSession | None" = None
        self.phase = "waiting"  # waiting -> running -> analyzing -> done
        self.report_path: Path | None = None
        self.verdict: str | None = None
        self.web_ui = None
        #: Each finished level's figures as it ended (see :meth:`level_ended`), by level index.
        self.frozen: dict[int, dict[str, Any]] = {}

    # -- life cycle ---------------------------------------------------------------
    def attach(self, session: "LoadSession") -> None:
        """Serve Locust's UI for the session's environment, with our tab and routes."""
        self.session = session
        env = session.env
        _ui_ignores_our_command_line()
        # The options Locust's UI reads from its own command line; the scenario sets the load.
        for name, value in {"num_users": None, "spawn_rate": None, "run_time": None, "stats_history_enabled": False}.items():
            if not hasattr(env.parsed_options, name):
                setattr(env.parsed_options, name, value)
        # A shape in place before the first batch tells Locust's form to hide its user count
        # and spawn rate fields: the scenario decides the levels.
        if env.shape_class is None:
            env.shape_class = SteppedShape(self.scenario.load.concurrency_levels(), self.scenario.load.level_duration_s,
                                           session.clock)
        env.locustfile = env.locustfile or f"loadtest: {self.scenario.name}"  # the UI's title
        _check_port_free(self.host, self.port)  # a busy port is one line, not a traceback from the server greenlet
        web_ui = env.create_web_ui(host=self.host, port=self.port, delayed_start=True)
        web_ui.template_args.update(
            extended_tabs=[{"title": "Levels", "key": LEVELS_TAB}],
            extended_tables=[{"key": LEVELS_TAB, "structure": self.metrics.level_table()}],
            extended_csv_files=[
                {"href": "./loadtest/charts", "title": self.metrics.title()},
                {"href": "./loadtest/levels", "title": "Levels so far (JSON)"},
                {"href": "./loadtest/report", "title": "The run's report (once the run has ended)"},
            ],
        )
        self._add_routes(web_ui)
        web_ui.start()
        self.web_ui = web_ui
        self._wait_until_serving(web_ui)

    @staticmethod
    def _wait_until_serving(web_ui, timeout_s: float = 5.0) -> None:
        """Locust binds the port in its server greenlet; surface a failure here, as an OSError."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            server = getattr(web_ui, "server", None)
            if web_ui.greenlet.dead:
                err = web_ui.greenlet.exception
                raise err if isinstance(err, OSError) else OSError(str(err or "the web UI's server stopped"))
            if server is not None and server.started:
                return
            gevent.sleep(0.05)
        raise OSError(f"the web UI did not start within {timeout_s:g} s")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def wait_for_start(self, stop: gevent.event.Event) -> bool:
        """Wait for the UI's Start button (True), or a stop before it (False)."""
        while not self.start_requested.is_set() and not stop.is_set():
            gevent.sleep(0.1)
        started = self.start_requested.is_set() and not stop.is_set()
        if started:
            self.phase = "running"
        return started

    def level_ended(self, index: int) -> None:
        """Keep a finished level's figures as they were when it ended (its records flushed).

        Requests that started in a level and are still streaming when it ends
        would otherwise keep adding their later chunk gaps, which the next,
        heavier level slows down, to this level's ITL. The analysis gives each
        chunk gap to the level it arrived in; freezing the live figures at the
        level's end is the live view's nearest equivalent (and matches the
        terminal's line for the level).
        """
        self.frozen[index] = self.metrics.figures(dict(self.progress.snapshot()).get(index))

    def analyzing(self) -> None:
        self.phase = "analyzing"

    def finished(self, report_path: Path, verdict: str) -> None:
        self.report_path = report_path
        self.verdict = verdict
        self.phase = "done"

    def linger(self, seconds: float) -> None:
        """Keep serving the finished run (its report link) until Stop, Ctrl-C or ``seconds``."""
        if seconds <= 0:
            return
        watchers = [gevent.signal_handler(signum, self.quit_requested.set) for signum in (signal.SIGINT, signal.SIGTERM)]
        try:
            self.quit_requested.wait(timeout=seconds)
        finally:  # not left behind for a next run in this process (orchestrate.release_signals)
            for watcher in watchers:
                watcher.cancel()

    def close(self) -> None:
        if self.web_ui is not None:
            try:
                self.web_ui.stop()
            except Exception:  # noqa: BLE001 - a UI that fails to stop must not cost the report
                log.exception("could not stop the web UI")
            self.web_ui = None

    # -- what the UI shows ------------------------------------------------------------
    def _label(self, concurrency: int, rate_rps: float | None) -> str:
        """A level named as the terminal names it: ``8 users``, ``4 req/s``, ``2× the trace window``."""
        return level_label(concurrency, rate_rps, self.trace_rate_rps)

    def _planned_label(self, level) -> str:
        return self._label(*self.mode.level_load(level))

    def _status(self, span) -> str:
        if span.end_wall is None:
            return "running"
        verdict = (span.decision or {}).get("verdict")
        return f"done: {verdict}" if verdict else "done"

    def _next_level(self) -> str | None:
        """The level that comes next, in words (refine probes are chosen as they go)."""
        if self.phase in ("analyzing", "done"):
            return None
        spans = list(self.spans)
        if not spans:
            return self._planned_label(self.planned[0]) if self.planned else None
        last = spans[-1]
        if last.refine:
            return "a refine probe chosen from this level's verdict"
        swept = [s for s in spans if not s.refine]
        position = len(swept)
        if position < len(self.planned):
            return self._planned_label(self.planned[position])
        if last.end_wall is not None or not self.refine:  # "refine probes, if --refine" read the same either way
            return None
        return "refine probes, if a level fails (--refine)"

    def levels_payload(self) -> dict[str, Any]:
        """The data endpoint: every level so far with its figures, the SLO lines, the run's phase."""
        progress = dict(self.progress.snapshot())
        levels = []
        current = None
        for span in list(self.spans):
            figures = self.frozen.get(span.index) if span.end_wall is not None else None
            if figures is None:
                figures = self.metrics.figures(progress.get(span.index))
            decision = span.decision or {}
            row = {
                "index": span.index,
                "concurrency": span.concurrency,
                "rate_rps": span.rate_rps,
                "label": self._label(span.concurrency, span.rate_rps),
                "refine": span.refine,
                "status": self._status(span),
                "finished": span.end_wall is not None,
                "start_wall": span.start_wall,
                "end_wall": span.end_wall,
                "elapsed_s": round((span.end_wall or time.time()) - span.start_wall, 3),
                **figures,
                "verdict": decision.get("verdict"),
                "ended": decision.get("ended"),
                # the look's reason, said to be the look's: the row's figures are the live ones, not the look's
                "why": (look_prefix({"looks_taken": span.looks}) + decision["why"]) if decision.get("why") else None,
                "decision": decision,
            }
            levels.append(row)
            if span.end_wall is None:
                current = row
        return {
            "scenario": self.scenario.name,
            "phase": self.phase,
            "planned": self.planned,
            "current": current,
            "next": self._next_level(),
            "levels": levels,
            "slo": self.slo,
            "metric_labels": self.metrics.labels,
            "note": self.metrics.note,  # why a kind that is not streamed has no TTFT/ITL charts
            "report": "./loadtest/report" if self.report_path is not None else None,
            "report_path": str(self.report_path) if self.report_path is not None else None,
            "verdict": self.verdict,
        }

    def _table_rows(self) -> list[dict[str, Any]]:
        data = self.levels_payload()
        rows = []
        for level in data["levels"]:
            rows.append({
                "level": level["index"] + 1,
                "load": level["label"],
                "status": level["status"] + (" (refine)" if level["refine"] else ""),
                "requests": level["requests"],
                "errors": level["errors"],
                **{cell_key(m, pct): _cell(level[m][pct]) for m, pcts in self.metrics.table.items() for pct in pcts},
                "ended": describe_ending(level["decision"]) if level["ended"] else f"{level['elapsed_s']:.0f} s so far",
            })
        if data["next"] is not None:
            rows.append({"level": "next", "load": data["next"], "status": "planned"})
        if data["phase"] == "waiting":
            rows.append({"level": "-", "status": "press Start to begin the scenario's levels"})
        if data["phase"] == "done":
            rows.append({"level": "report", "status": f"{data['verdict']} (open ./loadtest/report)"})
        return rows

    # -- routes, through Locust's extension points -------------------------------------
    def _add_routes(self, web_ui) -> None:
        app = web_ui.app

        @app.before_request
        def run_buttons():
            """Start and Stop drive the scenario's run instead of Locust's own swarm."""
            if request.method != "POST":
                return None
            if request.path.endswith("/swarm"):
                return jsonify(self._on_start())
            if request.path.endswith("/stop"):
                return jsonify(self._on_stop())
            return None

        @app.after_request
        def add_levels_tab(response):
            if request.path.endswith("/stats/requests") and response.is_json:
                body = dict(response.get_json())
                body["extended_stats"] = [{"key": LEVELS_TAB, "data": self._table_rows()}]
                response.set_data(_dumps(body))
            return response

        @app.route("/loadtest/levels")
        @web_ui.auth_required_if_enabled
        def loadtest_levels():
            return jsonify(self.levels_payload())

        @app.route("/loadtest/charts")
        @web_ui.auth_required_if_enabled
        def loadtest_charts():
            return Response(CHARTS_PAGE, mimetype="text/html")

        @app.route("/loadtest/plotly.js")
        def loadtest_plotly():
            return Response(plotly_js(), mimetype="application/javascript")

        @app.route("/loadtest/report")
        @web_ui.auth_required_if_enabled
        def loadtest_report():
            if self.report_path is None or not self.report_path.is_file():
                return Response("The report is written when the run ends.", status=404, mimetype="text/plain")
            return send_file(self.report_path.resolve(), mimetype="text/html")

    def _on_start(self) -> dict[str, Any]:
        host = self.session.env.host if self.session else ""
        if self.phase != "waiting" or self.start_requested.is_set():
            return {"success": False, "message": "this run has started already; start another with loadtest run", "host": host}
        self.start_requested.set()
        return {"success": True, "message": f"loadtest run started: {self.mode.describe()}", "host": host}

    def _on_stop(self) -> dict[str, Any]:
        if self.phase == "done":
            self.quit_requested.set()
            return {"success": True, "message": "loadtest has ended; the UI closes"}
        if self.session is not None:
            self.session.request_stop("web_ui")  # the same path as Ctrl-C
        return {"success": True, "message": "stopping: the records are kept, analyzed and reported"}


def _check_port_free(host: str, port: int) -> None:
    """Bind the address the way gevent's server will (SO_REUSEADDR), then let it go; OSError if taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


def _ui_ignores_our_command_line() -> None:
    """Locust's UI parses ``sys.argv`` with *its* parser for extra UI options; ours is not Locust's.

    ``WebUI.update_template_args`` calls ``argument_parser.ui_extra_args_dict()``
    with no arguments, which parses our command line (``loadtest run … --web``)
    and exits on options Locust does not know. As a library we have no Locust
    command line, so it is given an empty one (no extra UI options).
    """
    original = argument_parser.ui_extra_args_dict
    if not isinstance(original, functools.partial):
        argument_parser.ui_extra_args_dict = functools.partial(original, args=[])


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _dumps(body: dict) -> str:
    return json.dumps(body, default=str)
