"""Local and remote workers for a distributed run: the master session, and the worker processes it spawns.

``--workers N`` starts a master on a free local port and N ``loadtest worker``
processes on this machine; ``--master`` waits for workers started elsewhere.
Either way Locust's master/worker runners do the dispatch
(:mod:`loadtest.load.distributed`); this module only starts and stops them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import yaml

from loadtest.load.cores import local_worker_count
from loadtest.load.distributed import PARENT_ENV, MasterSession
from loadtest.scenario import Scenario


def start_master(scenario, options, state, clock, recorder, monitor, settings, sink, on_level_change, console):
    """Start the master session, spawn local workers if asked, and wait for them."""
    n_local = local_worker_count(options.workers)
    local = n_local > 0
    bind_host = "127.0.0.1" if local else options.master_bind_host
    bind_port = free_port() if local else options.master_bind_port
    expected = n_local if local else options.expect_workers
    session = MasterSession(
        scenario, clock, recorder, monitor, settings, on_level_change,
        bind_host=bind_host, bind_port=bind_port, sink=sink, expected_workers=expected,
    )
    state.record.mode = "workers" if local else "master"
    console.print(f"waiting for {expected} worker(s) on {bind_host}:{bind_port}")
    with private_scenario_file(scenario) as scenario_file:
        workers = spawn_workers(scenario_file, n_local, bind_port, state.run_dir, options.worker_timeout_s) if local else []
        try:
            # Once connected, every worker has read the file: it can go.
            session.wait_for_workers(expected, options.worker_timeout_s)
        except BaseException:
            session.close()
            stop_workers(workers)
            raise
    return session, workers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def private_scenario_file(scenario: Scenario) -> Iterator[str]:
    """The full scenario (headers included) for local workers, readable by us only, then deleted.

    It never goes into the run folder, which must hold no secret.
    """
    fd, path = tempfile.mkstemp(prefix="loadtest-scenario-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(scenario.model_dump(mode="json"), fh)
        yield path
    finally:
        os.unlink(path)


def spawn_workers(path: str, n: int, port: int, run_dir: Path, wait_s: float = 60.0) -> list[subprocess.Popen]:
    """Start ``n`` local ``loadtest worker`` processes on the scenario file ``path``.

    Each waits for its master's first answer as long as the master waits for it (``wait_s``, the
    run's ``--worker-timeout``): on a busy machine a worker's start can take seconds, and it should
    not give up on a master that is listening already.
    """
    procs = []
    env = {**os.environ, PARENT_ENV: str(os.getpid())}  # they stop the moment this process dies
    for i in range(n):
        log = open(run_dir / f"worker-{i}.log", "w")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "loadtest", "worker", "--master-host", "127.0.0.1", "--master-port", str(port),
                 "--master-wait", f"{wait_s:g}", path],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            )
        )
    return procs


def stop_workers(procs: list[subprocess.Popen]) -> None:
    """Workers exit when the master quits; anything left after a grace period is killed."""
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)
