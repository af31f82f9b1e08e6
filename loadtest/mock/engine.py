"""The continuous-batching engine: one asyncio loop of decode steps.

Why a loop of steps and not a sleep per request: a real server (vLLM, TGI,
SGLang) decodes all its running sequences together, so the time between two
tokens of *one* stream depends on how many *other* streams run. That
coupling is what makes capacity a property of the server and not of the
request, and it is what a capacity test must find. The model (MODEL.md):

- at most ``max_batch`` sequences run; the others wait, first come first served;
- a step starts by admitting waiting sequences into free slots, then lasts
  ``decode_base_ms + decode_per_seq_ms * running
  + prefill_per_token_ms * (prompt tokens of the sequences admitted now)``;
- at its end every running sequence gets one token (so a sequence's first
  token comes at the end of the step that admitted it), and sequences that
  reached ``max_tokens`` leave, freeing their slots for the next step.

Steps are scheduled against absolute deadlines (a step's end is the previous
step's end plus its duration, on the loop clock), so the ~1 ms overshoot of
every timer wake-up does not accumulate into drift. When nothing runs the
engine waits on an event: no busy loop.

Why sinks: a token must not cost a task wake-up (400 streams at 100 tokens/s
would be 40,000 wake-ups a second). At the end of a step the engine calls
each sequence's *sink* synchronously -- for a stream it writes the chunk
straight to the socket -- and resolves one future per sequence, once, when it
leaves the batch.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from typing import Callable

from loadtest.mock.config import MockConfig
from loadtest.mock.roofline import from_config as roofline_of

#: ``sink(generated) -> keep_going``. The engine calls it with the number of
#: tokens generated so far after each token (1, 2, ..., max_tokens), and with
#: 0 to ask whether the sequence is still wanted without sending anything (on
#: admission, and at each step of a stall: its client may have gone while it
#: waited). ``False`` aborts the sequence and frees its slot.
Sink = Callable[[int], bool]

_log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    """How a sequence left the engine (the result of :attr:`Sequence.done`)."""

    FINISHED = "finished"
    """All ``max_tokens`` were generated."""
    ABORTED = "aborted"
    """Its sink said stop: the client went away, or an injected drop."""
    SHUTDOWN = "shutdown"
    """The server is stopping."""


class Sequence:
    """One request inside the engine."""

    __slots__ = (
        "prompt_tokens",
        "max_tokens",
        "sink",
        "stall_at",
        "stall_s",
        "generated",
        "stall_until",
        "done",
        "cached_tokens",
    )

    def __init__(
        self,
        prompt_tokens: int,
        max_tokens: int,
        sink: Sink,
        *,
        stall_at: int = 0,
        stall_s: float = 0.0,
        cached_tokens: int = 0,
    ) -> None:
        self.prompt_tokens = prompt_tokens
        #: Prompt tokens the prefix cache served (mock/prefix_cache.py): not prefilled.
        self.cached_tokens = min(cached_tokens, prompt_tokens)
        self.max_tokens = max_tokens
        self.sink = sink
        #: After this many tokens, pause ``stall_s`` seconds holding the slot (0 = never).
        self.stall_at = stall_at
        self.stall_s = stall_s
        self.generated = 0
        self.stall_until = 0.0
        self.done: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Engine:
    """Runs decode steps over the sequences submitted to it.

    Counters are plain attributes, read by :mod:`loadtest.mock.metrics`.
    """

    def __init__(self, config: MockConfig) -> None:
        self.max_batch = config.max_batch
        #: Roofline mode (roofline.py): step times from declared hardware and model; None = off.
        self._roofline = roofline_of(config)
        #: this start's run-to-run drift (``--drift``): one factor on every step cost (both modes)
        self.slowdown = config.slowdown()
        self._base_s = config.decode_base_ms / 1000.0 * self.slowdown
        self._per_seq_s = config.decode_per_seq_ms / 1000.0 * self.slowdown
        self._prefill_s = config.prefill_per_token_ms / 1000.0 * self.slowdown
        self._waiting: deque[Sequence] = deque()
        self._running: list[Sequence] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: True once :meth:`stop` began: waiters outside the engine (a hung request) give up.
        self.stopped = False
        # Counters (vLLM's names in metrics.py).
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.success_total = 0
        self.steps_total = 0
        #: How late step ends were served, versus their deadlines (timer
        #: overshoot plus time the loop was busy elsewhere). A large max means
        #: the mock itself was overloaded and its timings are not the model's.
        self.late_s_total = 0.0
        self.late_s_max = 0.0
        #: CPU time spent handing out the tokens of a step (mostly socket
        #: writes). When late + emit approaches the step duration, the mock is
        #: at the limit of what one core can serve.
        self.emit_s_total = 0.0
        self.emit_s_max = 0.0

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def queue_depth_if_added(self) -> int:
        """How many requests would wait for a slot if one more arrived now.

        Not ``len(waiting)``: arrivals always sit in ``waiting`` until the next
        step starts, even when slots are free, and those do not really queue.
        """
        return max(0, len(self._running) + len(self._waiting) + 1 - self.max_batch)

    def submit(self, seq: Sequence) -> None:
        """Queue a sequence; it is admitted at the start of the next step with a free slot."""
        self._waiting.append(seq)
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="mock-engine")

    async def stop(self) -> None:
        """Stop stepping and release every sequence with :attr:`Outcome.SHUTDOWN`."""
        self.stopped = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        for seq in [*self._running, *self._waiting]:
            if not seq.done.done():
                seq.done.set_result(Outcome.SHUTDOWN)
        self._running.clear()
        self._waiting.clear()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        running = self._running
        waiting = self._waiting
        max_batch = self.max_batch
        base_s, per_seq_s, prefill_s = self._base_s, self._per_seq_s, self._prefill_s
        roofline = self._roofline
        next_start = 0.0
        idle = True
        while True:
            if not running and not waiting:
                self._wake.clear()
                await self._wake.wait()
                idle = True
            now = loop.time()
            start = now if idle else next_start
            idle = False

            # Admission, FIFO, into free slots.
            prefill_tokens = 0
            prompt_tokens = 0
            admitted = 0
            while waiting and len(running) < max_batch:
                seq = waiting.popleft()
                if seq.done.done() or not seq.sink(0):
                    _finish(seq, Outcome.ABORTED)
                    continue
                running.append(seq)
                prefill_tokens += seq.prompt_tokens - seq.cached_tokens
                prompt_tokens += seq.prompt_tokens
                admitted += 1
            if not running:
                idle = True
                continue
            self.prompt_tokens_total += prompt_tokens

            if roofline is None:
                duration = base_s + per_seq_s * len(running) + prefill_s * prefill_tokens
            else:
                # Every sequence's context is read; the admitted ones compute their prompts,
                # the others one token each.
                context = sum(s.prompt_tokens + s.generated for s in running)
                duration = roofline.step_s(context, len(running) - admitted + prefill_tokens) * self.slowdown
            if now - start > duration:
                # We fell a whole step behind (the loop was starved): start afresh
                # rather than fire a burst of back-to-back steps to catch up.
                start = now
            end = start + duration
            if end > loop.time():
                fut: asyncio.Future[None] = loop.create_future()
                handle = loop.call_at(end, _wake, fut)
                try:
                    await fut
                finally:
                    handle.cancel()
            else:
                await asyncio.sleep(0)  # let I/O in even when steps take no time
            woke = loop.time()
            late = woke - end
            self.steps_total += 1
            self.late_s_total += late
            if late > self.late_s_max:
                self.late_s_max = late

            # One token for every running sequence that is not stalled.
            left = 0
            tokens = 0
            for seq in running:
                stall_until = seq.stall_until
                if stall_until:
                    if end < stall_until:
                        if not seq.sink(0):  # a stalled client may give up: free its slot
                            _finish(seq, Outcome.ABORTED)
                            left += 1
                        continue
                    seq.stall_until = 0.0
                g = seq.generated + 1
                seq.generated = g
                try:
                    keep = seq.sink(g)
                except Exception:  # one broken sink must not stop the engine
                    _log.exception("mock: a sequence's sink failed; aborting it")
                    keep = False
                if not keep:
                    _finish(seq, Outcome.ABORTED)
                    left += 1
                    continue
                tokens += 1
                if g >= seq.max_tokens:
                    _finish(seq, Outcome.FINISHED)
                    self.success_total += 1
                    left += 1
                elif g == seq.stall_at:
                    seq.stall_until = end + seq.stall_s
            self.generation_tokens_total += tokens
            emit = loop.time() - woke
            self.emit_s_total += emit
            if emit > self.emit_s_max:
                self.emit_s_max = emit
            if left:
                running[:] = [s for s in running if not s.done.done()]
            next_start = end


def _finish(seq: Sequence, outcome: Outcome) -> None:
    if not seq.done.done():
        seq.done.set_result(outcome)
