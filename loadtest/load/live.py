"""The live view during a run: where the run is, and the figures so far.

While a level runs it shows its elapsed time, what is left, and the requests
so far. What is left is said honestly: a level ends at its next look if that
look finds it decided, and at the last look (``max_level_duration_s``) at
the latest, so the view gives both ("next look in 4 s, at most 52 s left").
Once its window has ended, the level's load is held until the requests it
measured finish (:mod:`loadtest.load.hold`); the view then says so ("decided
pass at 6.6 s; holding its load until its 7 measured requests finish"), not
the looks that no longer come.

On a terminal it is a rich ``Live`` table with a progress bar for the level in
force (against its longest possible length), refreshed every second. Elsewhere
(CI logs) it prints plain lines: one as each level starts, one every
:data:`PLAIN_EVERY_S` while it runs, and one as it ends, so logs stay readable.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import gevent
from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from loadtest.analysis.results import fmt_rate
from loadtest.load.progress import LevelFigures, LevelProgress, RunProgress, errors_text
from loadtest.report.terminal import describe_ending

if TYPE_CHECKING:
    from loadtest.load.levels import LevelSpan

#: How often a plain (non-terminal) progress line is printed while a level runs.
PLAIN_EVERY_S = 10.0
#: The longest the end of the run waits for the last level's line (its figures settle in 2 s at most).
ANNOUNCE_WAIT_S = 5.0


def _fmt(x: float | None) -> str:
    """A figure as the final table shows it: ∞ where failures reach the percentile."""
    if x is None:
        return "-"
    return "∞" if math.isinf(x) else f"{x:.1f}"


def level_label(concurrency: int, rate_rps: float | None, trace_rate_rps: float | None = None) -> str:
    """How the level is named, as the final table names it: ``8 users``, ``4 req/s``, or in
    trace replay ``2× the trace window`` (its rate over the window's mean rate, to 3 decimals)."""
    if rate_rps is not None and trace_rate_rps:
        return f"{round(float(rate_rps) / float(trace_rate_rps), 3):g}× the trace window"
    if rate_rps is not None:
        return f"{fmt_rate(rate_rps)} req/s"
    return f"{concurrency} user" + ("" if concurrency == 1 else "s")


def progress_line(
    index: int, p: LevelProgress | LevelFigures, unary: bool = False, trace_rate_rps: float | None = None
) -> str:
    """The level's figures so far: TTFT and ITL of a stream; e2e and items/s of an answer that is not one."""
    label = level_label(p.concurrency, p.rate_rps, trace_rate_rps)
    head = f"level {index + 1}: {label}, {p.requests} requests, {errors_text(p.errors, p.error_kinds)}, "
    if unary:  # embeddings, rerank, score: no first token, no token gaps
        return head + f"e2e p95 {_fmt(p.e2e_p95())} ms, {_fmt(p.items_per_s())} items/s"
    ttft, itl = p.p95()
    return head + f"TTFT p95 {_fmt(ttft)} ms, ITL p95 {_fmt(itl)} ms"


def remaining_text(elapsed: float, looks: Sequence[float]) -> str:
    """What is left of a level that is looked at ``looks`` seconds after it starts."""
    if not looks:
        return "length unknown"
    last = looks[-1]
    upcoming = [at for at in looks if at > elapsed]
    if not upcoming:
        return "judging the last look now"
    if upcoming[0] == last:
        return f"at most {last - elapsed:.0f} s left (last look)"
    return f"next look in {upcoming[0] - elapsed:.0f} s (ends then if decided), at most {last - elapsed:.0f} s left"


def hold_text(decision: dict, holding: int, held_s: float) -> str:
    """What a level in its hold is doing: its window ended (how, and when), its load held for its requests."""
    ran = decision.get("ran_s")
    at = f" at {ran:.1f} s" if ran is not None else ""
    ended = decision.get("ended")
    if ended in ("decided", "decided_early", "decided_after_extension"):
        head = f"decided {decision.get('verdict')}{at}"
    elif ended == "undecided_at_max":
        head = f"still undecided at its last look{at}"
    else:
        head = f"window ended{at}"
    requests = f"{holding} measured request finishes" if holding == 1 else f"{holding} measured requests finish"
    return f"{head}; holding its load until its {requests} ({held_s:.1f} s so far)"


@dataclass
class RunningLevel:
    """The level in force, as the live view needs it."""

    index: int
    concurrency: int
    started: float  # time.monotonic()
    refine: bool = False
    #: Open loop (and trace replay): the level's offered rate; None for a level of users.
    rate_rps: float | None = None
    #: The load stage's span of the level: its decision, and its hold while one runs (None: unknown).
    span: "LevelSpan | None" = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def holding(self) -> int | None:
        """The measured requests its hold still waits for, once its window has ended; None before."""
        span = self.span
        if span is None or span.holding is None or not span.decision.get("ended"):
            return None
        return span.holding


class LiveView:
    """Shows the run's per-level progress while Locust runs."""

    def __init__(
        self,
        progress: RunProgress,
        console: Console | None = None,
        looks: Sequence[float] = (),
        unary: bool = False,
        trace_rate_rps: float | None = None,
    ) -> None:
        self.progress = progress
        #: Trace replay: the window's mean rate (speedup 1), so a level is named by its speedup.
        self.trace_rate_rps = trace_rate_rps
        #: The request kind is not streamed (embeddings, rerank, score): show e2e and items/s.
        self.unary = unary
        self.console = console or Console(stderr=True)
        #: When each level is looked at (s after its start); the last is its longest length.
        self.looks = list(looks)
        self.current: RunningLevel | None = None
        self._live: Live | None = None
        self._greenlet: gevent.Greenlet | None = None
        self._last_plain = 0.0
        #: The greenlet printing the last level change's lines (:meth:`level_changed`).
        self._announcing: gevent.Greenlet | None = None

    def start(self) -> None:
        if self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, auto_refresh=False, transient=False)
            self._live.start()
        self._greenlet = gevent.spawn(self._refresh)

    def _refresh(self) -> None:
        while True:
            gevent.sleep(1.0)
            if self._live is not None:
                self._live.update(self._render(), refresh=True)
            elif (self.current is not None and time.monotonic() - self._last_plain >= PLAIN_EVERY_S
                  and (self._announcing is None or self._announcing.dead)):  # not before the last level's line
                self._print_plain()

    # -- the level in force ---------------------------------------------------------------
    def level_started(
        self, index: int, concurrency: int, refine: bool = False, rate_rps: float | None = None,
        span: "LevelSpan | None" = None,
    ) -> None:
        self.current = RunningLevel(index, concurrency, time.monotonic(), refine, rate_rps, span)
        if self._live is None:
            self._print_plain()

    def running_line(self, level: RunningLevel | None = None) -> str | None:
        """``level 3 (16 users): 12 s elapsed, next look in 3 s …, 240 requests so far (12 errors: timeout 12)``
        (of ``level``, by default the one in force)."""
        level = level or self.current
        if level is None:
            return None
        p = dict(self.progress.snapshot()).get(level.index)
        requests = p.requests if p is not None else 0
        errors = errors_text(p.errors, p.error_kinds, joined=": ") if p is not None else "0 errors"
        kind = ", refine" if level.refine else ""
        head = f"level {level.index + 1} ({level_label(level.concurrency, level.rate_rps, self.trace_rate_rps)}{kind})"
        holding = level.holding()
        if holding is not None and level.span is not None:  # its window has ended: no look is to come
            held = max(0.0, time.time() - (level.span.end_wall or time.time()))
            return f"{head}: {hold_text(level.span.decision, holding, held)}, {requests} requests measured ({errors})"
        elapsed = level.elapsed()
        when = "started" if elapsed < 0.5 else f"{elapsed:.0f} s elapsed"
        return f"{head}: {when}, {remaining_text(elapsed, self.looks)}, {requests} requests so far ({errors})"

    def _print_plain(self, level: RunningLevel | None = None) -> None:
        line = self.running_line(level)
        if line is not None:
            self.console.print(line, highlight=False)
            self._last_plain = time.monotonic()

    def _render(self) -> Group:
        parts: list = [self._table()]
        level = self.current
        if level is not None and self.looks:
            longest = self.looks[-1]
            ran = level.span.decision.get("ran_s") if level.holding() is not None and level.span is not None else None
            done = float(ran) if ran is not None else level.elapsed()  # in its hold, the window's length
            bar = ProgressBar(total=longest, completed=min(done, longest), width=40)
            row = Table.grid(padding=(0, 1))
            row.add_row(bar, Text(self.running_line() or "", overflow="fold"))
            parts.append(row)
        return Group(*parts)

    def _table(self) -> Table:
        table = Table(title="loadtest run (live)", box=None)
        figures = ("e2e p95 ms", "items/s") if self.unary else ("TTFT p95 ms", "ITL p95 ms")
        for col in ("level", "load", "requests", "errors", *figures):
            table.add_column(col, justify="right")
        for index, p in self.progress.snapshot():
            values = (p.e2e_p95(), p.items_per_s()) if self.unary else p.p95()
            label = level_label(p.concurrency, p.rate_rps, self.trace_rate_rps)
            table.add_row(str(index + 1), label, str(p.requests), str(p.errors), *(_fmt(v) for v in values))
        return table

    def level_changed(
        self, previous: "LevelSpan | None", current: "LevelSpan | None",
        settle: Callable[[], object] = lambda: None, frozen: Callable[[int], None] | None = None,
    ) -> None:
        """A level ended (its hold too) and the next one began: the ended level's line is printed
        once its last records are in the figures (``settle``), then the next level's first line.

        Why not at once: the line went out right after the last flush, before the record writer's
        figures for it came back, and missed the requests that ended last (a trial read "87
        requests" against the final table's 88, and an open-loop TTFT p95 of 2618 ms against
        2,881). Why in a greenlet: the load's shape tick calls this, and the next level's users
        must not wait for a view. ``frozen``: told of the ended level once settled (the web UI
        keeps its figures then).
        """
        running = None
        if current is not None:
            running = self.current = RunningLevel(current.index, current.concurrency, time.monotonic(),
                                                  current.refine, current.rate_rps, current)
        elif previous is not None and self.current is not None and self.current.index == previous.index:
            self.current = None
        prior = self._announcing

        def announce() -> None:
            if prior is not None:
                prior.join()  # one level's lines after the one before
            if previous is not None:
                settle()
                self.level_ended(previous.index, previous.decision)
                if frozen is not None:
                    frozen(previous.index)
            if running is not None and self._live is None:
                self._print_plain(running)

        self._announcing = gevent.spawn(announce)

    def level_ended(self, index: int, decision: dict | None = None) -> None:
        """Print the level's line (when not live), with how long it ran and why it ended."""
        if self.current is not None and self.current.index == index:
            self.current = None
        levels = dict(self.progress.snapshot())
        if index not in levels:
            return
        line = progress_line(index, levels[index], self.unary, self.trace_rate_rps)
        if decision and decision.get("ended"):
            line += f"; ran {decision.get('ran_s', 0):.1f} s, {describe_ending(decision)}"
        if self._live is None:
            self.console.print(line, highlight=False)
        else:
            self._live.console.print(line, highlight=False)

    def stop(self) -> None:
        if self._announcing is not None:  # the last level's line, before the final table
            self._announcing.join(timeout=ANNOUNCE_WAIT_S)
        self.current = None
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
        if self._live is not None:
            self._live.update(self._render(), refresh=True)
            self._live.stop()
            self._live = None
