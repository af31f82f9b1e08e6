"""Before a refine probe: wait until the server has worked off what the last batch left queued.

Why: a batch that failed ends with the server's queue full. Its users stop and their requests are
cancelled, but a server need not drop a queued request whose client left: llama.cpp's
llama-server works through its deferred requests until it writes to each one's closed
connection. The next probe then started on that queue: on a trial's llama-server an open loop
refined from 40 req/s down to 20 req/s, and the 20 req/s level's first request waited 2.1 s, the
next ones ever less as the queue drained (the server kept up with 20 req/s): the level was judged
failing on the 40 req/s level's backlog, and the capacity read 19.38 req/s where it was higher.
Every request must be judged at the load it ran under.

So before each probe one short request (the preflight's kind, unmeasured) is sent, then another,
until one is answered about as fast as the preflight's was (within :data:`IDLE_FACTOR` times its
time to the first token, or :data:`IDLE_SLACK_MS` more): a request queued behind the backlog is
answered only once the backlog ahead of it is done. Bounded by the hold's cap and
:data:`MAX_REQUESTS`; an idle server costs one short request.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Callable

from loadtest.client.wire import Dialect
from loadtest.preflight import short_request
from loadtest.scenario import Scenario

#: A short answer within this many times the preflight's first-token time finds the server idle ...
IDLE_FACTOR = 3.0
#: ... or within this many milliseconds more (a fast server's few ms vary by more than a factor).
IDLE_SLACK_MS = 100.0
#: The most short requests one wait sends.
MAX_REQUESTS = 20
#: The pause after a short request the server refused, before the next.
PAUSE_S = 0.5


@dataclass(frozen=True)
class Settled:
    """How one wait went: how long, how many short requests, whether the server was found idle."""

    waited_s: float
    requests: int
    idle: bool
    first_ms: float  # the first short request's time to its answer's start (NaN: it failed)
    last_ms: float
    #: The last short request's failure (its kind), when it failed: then the wait says so, not "slow".
    error: str | None = None

    def line(self) -> str | None:
        """The terminal's line, only when the wait was worth saying (a queue was there, or stayed)."""
        if self.idle and self.requests <= 1:
            return None
        answered = f"a short request answered in {_ms(self.first_ms)}" + (
            f", the last of {self.requests} in {_ms(self.last_ms)}" if self.requests > 1 else "")
        if self.idle:
            return (f"refine: waited {self.waited_s:.1f} s for the server to work off the last level's queue "
                    f"before the next probe ({answered})")
        if self.error is not None:
            return (f"refine: the short requests sent to wait for the server's queue failed ({self.error}, "
                    f"{self.requests} in {self.waited_s:.1f} s); the next probe starts anyway")
        return (f"refine: the server was still slow after {self.waited_s:.1f} s ({answered}); the next probe "
                "starts anyway, and its first requests may wait behind the last level's queue")


def wait_until_idle(scenario: Scenario, dialect: Dialect, salt: str, baseline_ms: float, budget_s: float,
                    stopped: Callable[[], bool] = lambda: False) -> Settled:
    """Send short requests one at a time until one is answered about as fast as ``baseline_ms`` (the
    preflight's time to the first token; NaN for an answer that is not streamed: then as fast as the one
    before it), for at most ``budget_s`` seconds and :data:`MAX_REQUESTS` requests."""
    target = scenario.target
    api_key = os.environ.get(target.api_key_env) if target.api_key_env else None
    start = time.monotonic()
    first = last = math.nan
    sent = 0
    idle = False
    error: str | None = None
    while sent < MAX_REQUESTS and not stopped():
        left = budget_s - (time.monotonic() - start)
        if left <= 0.5:
            break
        rec = short_request(scenario, api_key, dialect, salt, timeout_s=left)
        sent += 1
        took = rec.ttft_ms if math.isfinite(rec.ttft_ms) else rec.e2e_ms
        took = float(took) if rec.ok and took is not None and math.isfinite(took) else math.nan
        previous, last = last, took
        first = took if sent == 1 else first
        error = None if rec.ok else (rec.error_kind or "unknown")
        if not rec.ok and not rec.status:
            break  # nothing answered: the probe's own records will say what the server does
        if not rec.ok:
            time.sleep(PAUSE_S)  # a refusal (429, 503) comes back at once: not a burst of them before the probe
            continue
        if math.isfinite(took) and took <= _idle_limit(baseline_ms, previous):
            idle = True
            break
    return Settled(time.monotonic() - start, sent, idle, first, last, error)


def _idle_limit(baseline_ms: float, previous_ms: float) -> float:
    """How fast an answer from an idle server is (module doc); without a baseline, not slower than the last."""
    if math.isfinite(baseline_ms) and baseline_ms > 0:
        return max(IDLE_FACTOR * baseline_ms, baseline_ms + IDLE_SLACK_MS)
    return 1.2 * previous_ms + 20.0 if math.isfinite(previous_ms) else -math.inf


def _ms(value: float) -> str:
    return f"{value:,.0f} ms" if math.isfinite(value) else "(failed)"
