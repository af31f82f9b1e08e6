"""The live view during a run: one line per level with the figures so far.

On a terminal it is a rich ``Live`` table refreshed every second; elsewhere
(CI logs) one plain line is printed as each level ends, so logs stay readable.
"""

from __future__ import annotations

import gevent
from rich.console import Console
from rich.live import Live
from rich.table import Table

from loadtest.load.progress import LevelProgress, RunProgress
from loadtest.report.terminal import describe_ending


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def progress_line(index: int, p: LevelProgress) -> str:
    ttft, itl = p.p95()
    return (
        f"level {index + 1}: {p.concurrency} users, {p.requests} requests, {p.errors} errors, "
        f"TTFT p95 {_fmt(ttft)} ms, ITL p95 {_fmt(itl)} ms"
    )


class LiveView:
    """Shows the run's per-level progress while Locust runs."""

    def __init__(self, progress: RunProgress, console: Console | None = None) -> None:
        self.progress = progress
        self.console = console or Console(stderr=True)
        self._live: Live | None = None
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        if self.console.is_terminal:
            self._live = Live(self._table(), console=self.console, auto_refresh=False, transient=False)
            self._live.start()
            self._greenlet = gevent.spawn(self._refresh)

    def _refresh(self) -> None:
        while True:
            gevent.sleep(1.0)
            if self._live is not None:
                self._live.update(self._table(), refresh=True)

    def _table(self) -> Table:
        table = Table(title="loadtest run (live)", box=None)
        for col in ("level", "users", "requests", "errors", "TTFT p95 ms", "ITL p95 ms"):
            table.add_column(col, justify="right")
        for index, p in self.progress.snapshot():
            ttft, itl = p.p95()
            table.add_row(str(index + 1), str(p.concurrency), str(p.requests), str(p.errors), _fmt(ttft), _fmt(itl))
        return table

    def level_ended(self, index: int, decision: dict | None = None) -> None:
        """Print the level's line (when not live), with how long it ran and why it ended."""
        levels = dict(self.progress.snapshot())
        if index not in levels:
            return
        line = progress_line(index, levels[index])
        if decision and decision.get("ended"):
            line += f"; ran {decision.get('ran_s', 0):.1f} s, {describe_ending(decision)}"
        if self._live is None:
            self.console.print(line, highlight=False)
        else:
            self._live.console.print(line, highlight=False)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
        if self._live is not None:
            self._live.update(self._table(), refresh=True)
            self._live.stop()
            self._live = None
