"""Locust's own distributed mode: a master that runs the shape, workers that send.

We build no cluster layer: Locust's master/worker runners do the dispatch,
heartbeats and rebalancing. What we add are custom messages:

- ``loadtest_setup`` (master -> worker): facts learned by the preflight;
- ``loadtest_level`` (master -> worker): the level changed, so every worker
  tags records with the right level; a worker that joins late says
  ``loadtest_hello`` and is sent the current level;
- ``loadtest_records`` (worker -> master): a batch of records about once a
  second, in the compact columnar encoding of :mod:`loadtest.load.batch`, and a
  final batch when the worker stops; the master writes the run folder, so no
  shared filesystem is needed;
- ``loadtest_ready`` (worker -> master): the answer to the setup, None or why
  this worker cannot hold its share of the users (too few file descriptors);
- ``loadtest_health`` (worker -> master): the worker's loop lag and CPU for a
  level that just ended; a level is ``client_saturated`` if any worker was.

TTFT and ITL come from each worker's own monotonic clock, so they are valid on
any host; wall-clock times only place requests on the timeline.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import STATE_MISSING, STATE_RUNNING, STATE_SPAWNING, Runner, WorkerRunner

from loadtest.errors import LoadtestError
from loadtest.load.fdlimit import TooFewFileDescriptors, ensure_fds, users_per_process
from loadtest.load.hold import measured_running
from loadtest.load.levels import LevelClock, LevelSpan
from loadtest.load.lost_workers import SpawnState, settle_losses
from loadtest.load.master_watch import DEFAULT_MASTER_TIMEOUT_S, give_up_without_master, stop_without_master
from loadtest.load.monitor import SelfMonitor, merge_worker_health
from loadtest.load.recorder import Recorder
from loadtest.load.modes import load_mode
from loadtest.load.session import LoadSession, library_options, tune_interpreter
from loadtest.load.stopping import stop_users_reliably
from loadtest.load.user import UserSettings, make_user_class
from loadtest.scenario import Scenario
from loadtest.workload import prepare

log = logging.getLogger(__name__)

MSG_SETUP = "loadtest_setup"
MSG_LEVEL = "loadtest_level"
MSG_HELLO = "loadtest_hello"
MSG_RECORDS = "loadtest_records"
MSG_HEALTH = "loadtest_health"
MSG_READY = "loadtest_ready"

#: How long after a level's window ends the hold trusts worker snapshots older than that end.
SNAPSHOT_GRACE_S = 2.5

#: How long the master waits for every worker to confirm it can hold its share of the users.
READY_TIMEOUT_S = 10.0


class WorkerError(LoadtestError):
    """Workers did not connect in time. Exit code 4."""

    exit_code = 4


@dataclass
class MasterSession(LoadSession):
    """A :class:`LoadSession` whose users run on workers; it writes what they send."""

    bind_host: str = "*"
    bind_port: int = 5557
    sink: Any = None
    #: The workers the run waits for (each checks its share of the users against its fd limit).
    expected_workers: int = 1
    health: dict[int, list[dict]] = field(default_factory=dict)
    spans: dict[int, LevelSpan] = field(default_factory=dict)
    workers_seen: set[str] = field(default_factory=set)
    workers_lost: list[dict] = field(default_factory=list)
    #: Each worker's answer to the setup: None (ready) or why it cannot run its share.
    ready: dict[str, str | None] = field(default_factory=dict)
    #: When each worker's latest batch of records arrived (wall clock): what a lost worker's loss starts from.
    last_records_wall: dict[str, float] = field(default_factory=dict)
    #: How many of ``workers_lost`` have had their users moved (by Locust, or by :meth:`_move_lost_users`).
    losses_settled: int = 0
    #: Each worker's share of an open loop's arrivals (:func:`~loadtest.load.arrivals.share_offsets`).
    streams_of: dict[str, int] = field(default_factory=dict)

    def make_scheduler(self):
        return None  # the workers schedule their own share of the arrivals

    def enough_for_a_look(self, span: LevelSpan) -> bool:
        """Looks are taken when due: the workers' records reach the master up to a second late."""
        return True

    def pending(self, span: LevelSpan) -> int:
        """The hold's count from the workers' latest in-flight snapshots (about one a second each).

        A snapshot sent before the window ended may miss a measured request that
        started just before the end, so zero is believed only once every worker
        has reported since, or :data:`SNAPSHOT_GRACE_S` after the end.
        """
        self.sink.drain()
        running = measured_running(self.sink.in_flight_frame(), span)
        if running or span.end_wall is None:
            return running
        lost = {w["worker"] for w in self.workers_lost}
        late = [w for w in self.workers_seen - lost if self.last_records_wall.get(w, 0.0) <= span.end_wall]
        return 1 if late and time.time() - span.end_wall < SNAPSHOT_GRACE_S else 0

    def create_runner(self) -> Runner:
        runner = self.env.create_master_runner(self.bind_host, self.bind_port)
        runner.register_message(MSG_RECORDS, self._on_records)
        runner.register_message(MSG_HEALTH, self._on_health)
        runner.register_message(MSG_HELLO, self._on_hello)
        runner.register_message(MSG_READY, self._on_ready)
        return runner

    # -- messages from workers ------------------------------------------------
    def _on_records(self, environment: Environment, msg: Any, **_: Any) -> None:
        self.workers_seen.add(msg.node_id)
        self.last_records_wall[msg.node_id] = time.time()
        self.sink({**msg.data, "source": msg.node_id})

    def _on_health(self, environment: Environment, msg: Any, **_: Any) -> None:
        index = int(msg.data["index"])
        report = dict(msg.data["health"], worker=msg.node_id)
        self.health.setdefault(index, []).append(report)
        span = self.spans.get(index)
        if span is not None:
            span.client = merge_worker_health(self.health[index])

    def _on_ready(self, environment: Environment, msg: Any, **_: Any) -> None:
        self.ready[msg.node_id] = msg.data.get("error")

    def _on_hello(self, environment: Environment, msg: Any, **_: Any) -> None:
        self.workers_seen.add(msg.node_id)
        self.runner.send_message(MSG_SETUP, {**self._setup(), "stream": self._stream_of(msg.node_id)}, client_id=msg.node_id)
        if self.clock.index >= 0:
            self.runner.send_message(MSG_LEVEL, self._level_message(), client_id=msg.node_id)

    # -- what the master tells workers ---------------------------------------
    def _stream_of(self, node_id: str) -> int:
        """The worker's share of the arrivals: the lowest number no other connected worker holds.

        Not Locust's ``worker_index``: it only grows (a worker that reconnects, a pod that restarts,
        gets a new one), so with indices {0, 2, 3} of 3 workers the shares ``index % 3`` gave two
        workers one share, each of its arrivals sent twice, and none the other.
        """
        if node_id not in self.streams_of:
            live = set(self.runner.clients) - {node_id}
            held = {n for peer, n in self.streams_of.items() if peer in live}
            self.streams_of[node_id] = next(n for n in range(len(held) + 1) if n not in held)
        return self.streams_of[node_id]

    def _setup(self) -> dict[str, Any]:
        return {
            "continuous_usage": self.settings.continuous_usage,
            "warmup_s": self.clock.warmup_s,
            "salt": self.settings.salt,
            "drop": list(self.settings.drop),
            "max_tokens_field": self.settings.max_tokens_field,
            # open loop: each worker sends its share ("stream", below) of rate / streams; the workers
            # expected, not only those connected so far (the first to say hello was told 1 of 1)
            "streams": max(1, self.expected_workers, len(self.runner.clients.ready) + len(self.runner.clients.running)
                           + len(self.runner.clients.spawning)),
            # the most users (senders) at once over all workers: each checks its file-descriptor limit
            "max_users": self.mode.max_users(),
            "workers": self.expected_workers,
        }

    def _level_message(self) -> dict[str, Any]:
        return {
            "index": self.clock.index, "concurrency": self.clock.concurrency,
            "start_wall": self.clock.start_wall, "rate_rps": self.clock.rate_rps,
        }

    def level_changed(self, previous: LevelSpan | None, current: LevelSpan | None) -> None:
        if current is None:
            self.clock.clear()
        else:
            self.spans[current.index] = current
        self.runner.send_message(MSG_LEVEL, self._level_message())
        if previous is not None and previous.index in self.health:
            previous.client = merge_worker_health(self.health[previous.index])
        if self.on_level_change is not None:
            self.on_level_change(previous, current)

    # -- workers ----------------------------------------------------------------
    def wait_for_workers(self, expected: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.runner.clients.ready) < expected:
            if time.monotonic() > deadline:
                raise WorkerError(
                    f"only {len(self.runner.clients.ready)} of {expected} workers connected within {timeout_s:g} s "
                    f"(master listening on {self.bind_host}:{self.bind_port})"
                )
            gevent.sleep(0.1)
        self.ready.clear()
        self.runner.send_message(MSG_SETUP, self._setup())
        self._wait_until_ready(expected)

    def _wait_until_ready(self, expected: int) -> None:
        """Each worker checks it can hold its share of the users (file descriptors) before any level.

        A worker that cannot is one line and exit 2 here, on the master, before
        the first level: never a level of EMFILE failures. A worker that does
        not answer (an older version) is not waited for beyond READY_TIMEOUT_S.
        """
        deadline = time.monotonic() + READY_TIMEOUT_S
        while len(self.ready) < expected and time.monotonic() < deadline:
            gevent.sleep(0.05)
        for worker, error in sorted(self.ready.items()):
            if error:
                raise TooFewFileDescriptors(f"worker {worker}: {error}")
        if len(self.ready) < expected:
            log.warning("only %d of %d workers confirmed their setup", len(self.ready), expected)

    def poll(self) -> None:
        """Notice workers that went missing: the run goes on, the loss is reported."""
        lost = {w["worker"] for w in self.workers_lost}
        for node in self.runner.clients.all:
            if node.state == STATE_MISSING and node.id not in lost:
                in_flight = getattr(self.sink, "in_flight", {}).get(node.id) or {}
                self.workers_lost.append(
                    {
                        "worker": node.id,
                        "lost_wall": time.time(),
                        "level_index": self.clock.index,
                        "concurrency": self.clock.concurrency,
                        # its records up to here are kept; what it had in flight then (and finished
                        # after) is lost with it
                        "last_records_wall": self.last_records_wall.get(node.id),
                        "in_flight_at_last_records": len(in_flight.get("start_wall") or []),
                    }
                )
                log.warning("worker %s went missing during level %d", node.id, self.clock.index)
        self._move_lost_users()

    def _move_lost_users(self) -> None:
        """Give a lost worker's users to the others where Locust did not (:mod:`~loadtest.load.lost_workers`)."""
        runner = self.runner
        spawn = SpawnState(
            running=runner.state in (STATE_RUNNING, STATE_SPAWNING), spawning_completed=runner.spawning_completed,
            user_count=runner.user_count, target=runner.target_user_count, workers_left=runner.worker_count,
        )
        self.losses_settled, dispatch = settle_losses(len(self.workers_lost), self.losses_settled, spawn)
        if dispatch:
            log.warning("moving the lost workers' users: %d of %d running", spawn.user_count, spawn.target)
            gevent.spawn(runner.start, spawn.target, runner.spawn_rate)

    @property
    def worker_ids(self) -> list[str]:
        return sorted({n.id for n in self.runner.clients.all} | self.workers_seen)


#: Set by ``loadtest run --workers N`` for the workers it spawns: the master's process id.
PARENT_ENV = "LOADTEST_MASTER_PID"
#: How often a local worker checks that its master is still alive.
PARENT_CHECK_S = 0.2


def exit_with_master() -> gevent.Greenlet | None:
    """A local worker ends the moment its master process is gone (kill -9, a crash).

    Locust's own worker waits 60 s for the master's heartbeat before it quits,
    and sends load all that while: a killed run would go on hammering the
    target with nobody recording. A worker spawned by ``--workers`` knows its
    master's pid, and an orphan is re-parented, so a changed parent pid means
    the master died. Its unsent records have nowhere to go; it exits at once.
    Remote workers (``loadtest worker`` started by hand) cannot see the master's
    process; they stop after a few seconds without its heartbeat (load/master_watch.py).
    """
    raw = os.environ.get(PARENT_ENV)
    if not raw or not raw.isdigit():
        return None
    master = int(raw)

    def watch() -> None:
        while os.getppid() == master:
            gevent.sleep(PARENT_CHECK_S)
        log.error("the master (pid %d) is gone; this worker stops its load and exits", master)
        logging.shutdown()
        os._exit(1)

    return gevent.spawn(watch)


def check_worker_fds(max_users: int, workers: int) -> str | None:
    """Whether this worker can hold its share of the users under its own open-file limit.

    The soft limit is raised up to the hard one if needed. Returns None when it
    can, else the one line the master stops the run with (before any level).
    """
    try:
        note = ensure_fds(users_per_process(max_users, workers), "this worker")
    except TooFewFileDescriptors as err:
        log.error("%s", err)
        return str(err)
    if note:
        log.info("%s", note)
    return None


def run_worker(scenario: Scenario, master_host: str, master_port: int, master_timeout_s: float | None = None,
               *, master_wait_s: float | None = None) -> int:
    """Serve as a Locust worker until the master quits (or is silent ``master_timeout_s``). Returns the records sent.

    No master's answer within ``master_wait_s`` (default: ``master_timeout_s``) is exit 4 too.
    """
    exit_with_master()

    prepare(scenario)  # read the datasets before connecting: users must not stall on the file
    clock = LevelClock(scenario.load.warmup_s)
    settings = UserSettings()
    holder: dict[str, WorkerRunner] = {}

    sent = [0]

    def send(batch: dict[str, Any]) -> None:
        holder["runner"].send_message(MSG_RECORDS, batch)
        sent[0] += len(batch["request_id"])
        log.info("records sent to the master: %d", sent[0])

    recorder = Recorder("worker", send)
    monitor = SelfMonitor.for_scenario(scenario, clock)
    scheduler = load_mode(scenario).scheduler(clock, recorder)
    user_class = make_user_class(scenario, clock, recorder, settings, scheduler)
    env = Environment(user_classes=[user_class], host=scenario.target.base_url, parsed_options=library_options())
    stop_users_reliably(env)
    master, timeout_s = f"the master at {master_host}:{master_port}", master_timeout_s or DEFAULT_MASTER_TIMEOUT_S
    with give_up_without_master(master_wait_s or timeout_s, describe=master):  # Locust's connect retries for 5 minutes
        runner = env.create_worker_runner(master_host, master_port)
    holder["runner"] = runner
    stop_without_master(env, runner, timeout_s, describe=master)
    recorder.buffer.worker = runner.client_id
    settings.worker_seed = hash(runner.client_id) & 0xFFFF

    def on_setup(environment: Environment, msg: Any, **_: Any) -> None:
        settings.continuous_usage = bool(msg.data["continuous_usage"])
        settings.drop = tuple(msg.data.get("drop", ()))
        settings.max_tokens_field = msg.data.get("max_tokens_field")
        clock.warmup_s = float(msg.data["warmup_s"])
        settings.salt = str(msg.data.get("salt", ""))
        if scheduler is not None:
            scheduler.streams = int(msg.data.get("streams") or 1)
            scheduler.stream = max(0, int(msg.data.get("stream", getattr(runner, "worker_index", 0))))
        error = check_worker_fds(int(msg.data.get("max_users") or 0), int(msg.data.get("workers") or 1))
        runner.send_message(MSG_READY, {"error": error})

    def on_level(environment: Environment, msg: Any, **_: Any) -> None:
        previous = clock.index
        health = monitor.cut()
        if previous >= 0:
            runner.send_message(MSG_HEALTH, {"index": previous, "health": health})
        data = msg.data
        if data["index"] >= 0:
            rate = data.get("rate_rps")
            clock.set(int(data["index"]), int(data["concurrency"]), float(data["start_wall"]),
                      rate_rps=float(rate) if rate else None)
        else:
            clock.clear()

    def on_test_stop(**_: Any) -> None:
        recorder.flush()  # the final batch goes before Locust's "client_stopped"

    runner.register_message(MSG_SETUP, on_setup)
    runner.register_message(MSG_LEVEL, on_level)
    env.events.test_stop.add_listener(on_test_stop)
    runner.send_message(MSG_HELLO, {})
    tune_interpreter()
    recorder.start()
    monitor.start()
    try:
        runner.greenlet.join()
    finally:
        monitor.stop()
        recorder.stop()
    return recorder.total
