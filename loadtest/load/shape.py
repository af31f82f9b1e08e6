"""The stepped load shape: hold each concurrency level until its verdict is decided.

The runner calls :meth:`SteppedShape.tick` ten times a second (:mod:`ticks`); we answer with the
user count for the current step. Closed-loop concurrency is Locust's own model
(N users, each sending its next request when the last one ends), so a level is
simply "N users". Users are spawned at once (a high spawn rate) so that the
level is in force from its first second; ``warmup_s`` absorbs the ramp.

How long a level lasts: without a ``decide`` callback, ``duration_s``. With
one, the level is looked at on a fixed schedule
(:class:`~loadtest.analysis.decide.LookSchedule`: ``min_level_duration_s``,
doubling, up to ``max_level_duration_s``). A look that finds the level decided
(pass or fail) ends it; an undecided level runs on to the next look, and ends
undecided at the last one. A due look waits until the level has measured
enough requests for its percentiles (``enough``; ``requests_for_a_look``):
at low load, 20 requests for a p95 take longer than the first look's time.
With ``stop_on_fail`` a certain failure also ends
the batch: the levels above it would fail too, and refinement starts from it.
With ``probe_before`` (``--refine``), a pass may put a probe in front of the
next level, where the measured slope says a limit is crossed
(:func:`loadtest.analysis.refine.probe_before`).
Each span records how long it ran, every look and why it ended.

Between a level's end and the next level (or the end of the batch) comes its
*hold* (:mod:`loadtest.load.hold`): with a ``pending`` callback, the level's
users (or rate) stay in force until the requests it measured have finished, so
that none of them is judged at the next level's load.
"""

from __future__ import annotations

import math
import time
from typing import Callable

from locust import LoadTestShape

from loadtest.analysis.decide import Decision, LookSchedule
from loadtest.load.hold import HOLD_CAP_S, Hold, Pending
from loadtest.load.levels import LevelClock, LevelSpan

Decide = Callable[[LevelSpan], Decision]
#: ``probe_before(spans so far, the next level)``: a level to run first, or None (see :mod:`loadtest.analysis.refine`).
ProbeBefore = Callable[[list[LevelSpan], int], "int | None"]

#: A look that waits for enough requests is tried again this often (seconds) after it was due.
DEFER_STEP_S = 1.0

#: Users started per second when a level begins: effectively "all at once".
SPAWN_RATE = 10_000


class SteppedShape(LoadTestShape):
    """Runs ``levels`` in order, each for ``duration_s``; then stops the test."""

    abstract = False

    def __init__(
        self,
        levels: list[int],
        duration_s: float,
        clock: LevelClock,
        *,
        first_index: int = 0,
        refine: bool = False,
        on_level_change: Callable[[LevelSpan | None, LevelSpan | None], None] | None = None,
        schedule: LookSchedule | None = None,
        decide: Decide | None = None,
        stop_on_fail: bool = False,
        pending: Pending | None = None,
        hold_cap_s: float = HOLD_CAP_S,
        enough: Callable[[LevelSpan], bool] | None = None,
        probe_before: ProbeBefore | None = None,
    ) -> None:
        super().__init__()
        self.levels = list(levels)
        self.duration_s = duration_s
        self.clock = clock
        self.first_index = first_index
        self.refine = refine
        self.on_level_change = on_level_change
        self.schedule = schedule
        self.decide = decide if schedule is not None else None
        self.stop_on_fail = stop_on_fail
        #: The measured requests of a level still in flight; None: no hold (the next level starts at once).
        self.pending = pending
        self.hold_cap_s = hold_cap_s
        #: Has a level measured enough requests for a look to decide? None: every look is taken when due.
        self.enough = enough
        #: After a pass: a level to run before the next one (``--refine``'s probes in the sweep), or None.
        self.probe_before = probe_before
        #: The steps that ``probe_before`` put into ``levels``: their spans are refine probes.
        self._probe_steps: set[int] = set()
        self._hold: Hold | None = None
        #: The last grid point (seconds into the level) at which a waiting look checked its count.
        self._checked = -1.0
        self._after_hold = 0
        self.spans: list[LevelSpan] = []
        self._current: LevelSpan | None = None
        self._entered = 0.0
        self._looks: list[float] = []
        #: Set when the last level has ended. The shape then keeps its users running
        #: (Locust would stop them at once on a None) so the session can let the last
        #: level's queued requests get their first token before it stops them itself.
        self.done = False
        self._last_users = 0

    def tick(self) -> tuple[int, float] | None:
        # The runner ticks every 0.1 s (load/ticks.py), so a level ends at the first tick
        # after it is due: levels last their duration to duration + 0.1 s, never less.
        if self.done:
            return self._last_users, SPAWN_RATE
        if self._hold is not None:
            if not self._hold.over():
                return self._last_users, SPAWN_RATE  # the level's load stays until its requests finish
            self._hold = None
            step = self._after_hold
        elif self._current is None:
            step = 0 if not self.spans else len(self.levels)
        elif self._level_over(time.perf_counter() - self._entered):
            step = self._current.index - self.first_index + 1
            if self.stop_on_fail and self._current.decision.get("verdict") == "fail":
                step = len(self.levels)  # a certain failure: the levels above it are not needed
            elif self._current.decision.get("verdict") == "pass":
                self._insert_probe(step)
            if self._start_hold(step):
                return self._last_users, SPAWN_RATE
        else:
            step = self._current.index - self.first_index
        if step >= len(self.levels):
            self.finish()
            self.done = True
            return self._last_users, SPAWN_RATE
        if self._current is None or self._current.index != self.first_index + step:
            self._enter(step)
        self._last_users = self.users(step)
        return self._last_users, SPAWN_RATE

    def _start_hold(self, step: int) -> bool:
        """The current level's window has ended: hold its load before ``step``? (True: holding.)"""
        span = self._current
        if self.pending is None or span is None:
            return False
        if span.end_wall is None:
            span.end_wall = time.time()  # the window ends now; the hold follows it
        # Also at the end of a batch, and also after a certain failure: its requests finish at the
        # load they ran under. (Holding a failed level only until first tokens saved about a second
        # per failing probe, but a stream cut soon after its first token reads a TPOT of its partial
        # gap: 227 ms against the 164 ms truth at 8 users of ITL = 20 + 18c.)
        hold = Hold(span, self.pending, self.hold_cap_s)
        if hold.over():
            return False
        self._hold, self._after_hold = hold, step
        return True

    def _insert_probe(self, step: int) -> None:
        """Before ``step`` (after a pass), run the level ``probe_before`` names, if any."""
        if self.probe_before is None or step >= len(self.levels):
            return
        probe = self.probe_before(self.spans, self.levels[step])
        if probe is not None:
            self.levels.insert(step, probe)
            self._probe_steps.add(step)

    def is_probe(self, step: int) -> bool:
        """Is ``step`` a refine probe (the whole batch is one, or ``probe_before`` put it in)?"""
        return self.refine or step in self._probe_steps

    def users(self, step: int) -> int:
        """How many users run at ``step`` (closed loop: the level itself)."""
        return self.levels[step]

    def new_span(self, step: int, now: float) -> LevelSpan:
        """The span of ``step`` and put it in force on the clock users read."""
        span = LevelSpan(index=self.first_index + step, concurrency=self.levels[step], start_wall=now, refine=self.is_probe(step))
        self.clock.set(span.index, span.concurrency, now)
        return span

    def _level_over(self, elapsed: float) -> bool:
        """Is the current level done? Takes the looks that are due (see module doc)."""
        span = self._current
        assert span is not None
        if self.decide is None:
            if elapsed >= self.duration_s:
                span.decision = {"ended": "duration", "ran_s": round(elapsed, 3)}
                return True
            return False
        while self._looks and elapsed >= self._looks[0]:
            if self._deferred(elapsed):
                return False
            at = self._looks.pop(0)
            # The look judges the level as of this instant; if it ends the level, the
            # level's window ends here too, so the saved run holds exactly the data the
            # verdict was taken on (not the few requests started while it was judged).
            span.looked_at = time.time()
            span.looking = True  # until its verdict (and the end it may set) is in: load/look_rows.py
            try:
                decision = self.decide(span)
                span.looks.append({
                    "at_s": at, "wall": span.looked_at, "verdict": decision.verdict, "why": decision.why,
                    # when it was taken (later than at_s when it waited for enough requests)
                    "taken_s": round(elapsed, 3),
                })
                last = not self._looks
                if decision.decided or last:
                    ended = "decided" if decision.decided else "undecided_at_max"
                    if decision.decided and at < self.duration_s:
                        ended = "decided_early"
                    elif decision.decided and at > self.duration_s:
                        ended = "decided_after_extension"
                    span.decision = {
                        "verdict": decision.verdict,
                        "why": decision.why,
                        "check": decision.check,
                        "ended": ended,
                        "ran_s": round(time.perf_counter() - self._entered, 3),
                        "looks": len(span.looks),
                        "extended": at > self.duration_s,
                    }
                    span.end_wall = span.looked_at
                    span.observed = dict(decision.observed)
                    return True
            finally:
                span.looking = False  # after the end it may set: a batch asked in between places its rows by it
            elapsed = time.perf_counter() - self._entered
        return False

    def _deferred(self, elapsed: float) -> bool:
        """Does the due look wait for more requests? (see ``enough``; never the last look)

        A look on a level that has measured too few requests for its percentiles
        can only say "too few samples". It waits, tick by tick, until the level has
        enough (checked once a second from its due time); when the next look falls due first, the waiting one is dropped and
        the next takes its place, so a level never takes more looks than the
        schedule's K that the confidence is corrected for.
        """
        if self.enough is None or self._current is None:
            return False
        while len(self._looks) > 1:
            due = self._looks[0]
            if elapsed >= self._looks[1]:
                self._looks.pop(0)  # never enough before the next look: that one takes its place
                continue
            # Checked on a grid from the due time, not at the tick the count is reached: that tick
            # comes just as a request ends, and in a TTFT-bound level a wave of them ends together,
            # when the requests in flight have waited least. A look there would see the shortest waits.
            point = due + math.floor((elapsed - due) / DEFER_STEP_S) * DEFER_STEP_S
            if point <= self._checked:
                return True
            self._checked = point
            return not self.enough(self._current)
        return False

    def finish(self) -> None:
        """End the current level now (the run is stopping)."""
        if self._hold is not None:
            self._hold.finish("stopped", censored=self._hold.pending(self._hold.span))
            self._hold = None
        if self._current is not None:
            self._enter(None)

    def _enter(self, step: int | None) -> None:
        now = time.time()
        previous = self._current
        if previous is not None and previous.end_wall is None:
            previous.end_wall = now
        if step is None:
            self._current = None
        else:
            span = self.new_span(step, now)
            self.spans.append(span)
            self._current = span
            self._entered = time.perf_counter()
            self._looks = list(self.schedule.looks) if self.schedule is not None else []
            self._checked = -1.0
        if self.on_level_change is not None and (previous is not None or step is not None):
            self.on_level_change(previous, self._current)


class RateShape(SteppedShape):
    """Open loop: ``levels`` are rates (requests/s); the user count is the in-flight cap.

    Users here are only senders (see :mod:`loadtest.load.open_loop`): the
    arrival scheduler hands each due arrival to a free one, so the number of
    users bounds the requests in flight (``load.max_in_flight``) and does not
    set the load. Looks, decisions and ``stop_on_fail`` are the closed loop's.
    """

    def __init__(self, rates: list[float], duration_s: float, clock: LevelClock, *, max_in_flight: int, **kwargs) -> None:
        super().__init__(list(rates), duration_s, clock, **kwargs)  # type: ignore[arg-type]
        self.max_in_flight = max_in_flight

    def users(self, step: int) -> int:
        return self.max_in_flight

    def new_span(self, step: int, now: float) -> LevelSpan:
        rate = float(self.levels[step])
        span = LevelSpan(index=self.first_index + step, concurrency=0, start_wall=now, refine=self.is_probe(step), rate_rps=rate)
        self.clock.set(span.index, 0, now, rate_rps=rate)
        return span

    def _enter(self, step: int | None) -> None:
        if step is None and self.clock.index >= 0:
            self.clock.clear()  # the level's window closed: no more arrivals
        super()._enter(step)
