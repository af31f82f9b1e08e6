"""The Locust user: one closed-loop stream of LLM requests.

:func:`make_user_class` builds the class from a scenario, because Locust wants
a class, not an instance, and the scenario is only known at run time. Each user
owns a keep-alive :class:`~loadtest.client.stream.StreamingClient` and its own
seeded :class:`~loadtest.workload.Workload`, sends its next request as soon as
the last one ends (``wait_time`` is zero), and tags each record with the level
in force when the request started. Locust's own request event is fired too, so
``locust.log`` and Locust's statistics stay meaningful.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gevent
from gevent import GreenletExit
from locust import User, constant, task

from loadtest.client.output_check import judge
from loadtest.client.record import answered_nothing
from loadtest.client.stream import client_for
from loadtest.load.backoff import backoff_s
from loadtest.load.levels import LevelClock
from loadtest.load.recorder import Recorder
from loadtest.scenario import Scenario
from loadtest.workload import Workload

if TYPE_CHECKING:
    from loadtest.load.open_loop import ArrivalScheduler, Slot


@dataclass
class UserSettings:
    """Facts learned at run time that users read when they start.

    On a worker they arrive from the master after the class was built, so the
    class holds this object, not copies of its values.
    """

    continuous_usage: bool = False
    worker_seed: int = 0
    #: Optional body fields the preflight found the target rejects (see client.wire.DROPPABLE).
    drop: tuple[str, ...] = ()
    #: The output-length field the preflight settled on (None: the scenario's).
    max_tokens_field: str | None = None
    #: This run's prompt salt (run.json ``prompt_salt``; empty with ``workload.cache_bust: false``),
    #: mixed into every nonce and shared prefix (see loadtest.workload).
    salt: str = ""


def make_user_class(
    scenario: Scenario,
    clock: LevelClock,
    recorder: Recorder,
    settings: UserSettings,
    scheduler: "ArrivalScheduler | None" = None,
) -> type[User]:
    """A Locust ``User`` subclass bound to this scenario, clock and recorder.

    With a ``scheduler`` (open loop, :mod:`loadtest.load.open_loop`) a user does
    not send as soon as its last request ended: it waits for the next due
    arrival, and the record carries that arrival's level and scheduled time.
    """
    target = scenario.target
    api_key = os.environ.get(target.api_key_env) if target.api_key_env else None
    counter = itertools.count()

    class LLMUser(User):
        host = target.base_url
        wait_time = constant(0)

        def on_start(self) -> None:
            self.index = next(counter)
            self.failures_in_a_row = 0
            self.client = client_for(target, api_key)
            self.workload = Workload(
                scenario,
                seed=settings.worker_seed * 1_000_003 + self.index,
                continuous_usage=settings.continuous_usage,
                drop=settings.drop,
                max_tokens_field=settings.max_tokens_field,
                salt=settings.salt,
                stream_seed=settings.worker_seed,
                user_tag=f"{recorder.buffer.worker}-{self.index}",
            )

        def on_stop(self) -> None:
            self.client.close()

        def _back_off(self, rec) -> None:
            """After a refused connection (or one closed unanswered) or a 429, wait a little before the next
            try (see :func:`backoff_s`)."""
            if rec.error_kind == "rate_limited" or answered_nothing(rec.error_kind, rec.status):
                self.failures_in_a_row += 1
                gevent.sleep(backoff_s(rec.retry_after_s, self.failures_in_a_row))
            else:
                self.failures_in_a_row = 0

        @task
        def stream(self) -> None:
            slot = scheduler.take() if scheduler is not None else None
            try:
                self._send(slot)
            finally:
                if scheduler is not None:
                    scheduler.done()

        def _send(self, slot: "Slot | None") -> None:
            trace = slot.trace if slot is not None else None
            planned = self.workload.next_request() if trace is None else self.workload.trace_request(trace)
            tags = {
                "request_class": planned.class_name,
                "turn": planned.turn,
                "conversation_id": planned.conversation_id,
                "prompt_words": planned.prompt_words,
                "images": planned.images,
                "image_bytes": planned.image_bytes,
                "prompt_source": planned.prompt_source,
                "slot": slot,
            }
            if slot is None:
                level_index, level = clock.index, clock.concurrency
                warmup = clock.in_warmup(time.perf_counter())
            else:
                level_index, level, warmup = slot.level_index, 0, slot.warmup
            recorder.begin(self.index, self.client, level_index, warmup, planned.class_name, slot)
            try:
                rec = self.client.send(planned.body, capture_text=planned.capture_text)
            except GreenletExit:
                if self.client.in_flight is not None:  # the run stopped mid-request: keep the record
                    recorder.add(self.client.in_flight, self.index, level_index, level, warmup, **tags)
                raise
            finally:
                recorder.end(self.index)
            judge(planned.output_check, rec)
            recorder.add(rec, self.index, level_index, level, warmup, **tags)
            self.workload.answered(rec.ok, rec.answer)
            if slot is None:  # open loop: the schedule, not a retry loop, decides when the next request goes
                self._back_off(rec)
            self.environment.events.request.fire(
                request_type="POST",
                name=target.api,
                response_time=rec.e2e_ms,
                response_length=rec.completion_tokens,
                exception=None if rec.ok else RuntimeError(f"{rec.error_kind}: {rec.error}"),
                context={},
            )
            pause = self.workload.think_time_s()  # between a conversation's turns
            if pause > 0 and slot is None:  # open loop: arrivals keep their own schedule
                gevent.sleep(pause)

    return LLMUser
