"""The fault matrix: every request accounted for while the server misbehaves at load.

For each fault, one ``loadtest run`` holds N concurrent streams for a fixed
level against a ``loadtest mock`` that injects it, and every request is then
matched against the mock's own count of how it ended
(``loadtest_mock_outcomes_total``) and of what reached it (``--arrival-log``,
which survives a kill -9); see ``tests/support/reconcile.py`` for the rules.
The run's analysis is checked too: the error budget fails where the failures
exceed it, and failed requests reach the latency percentiles as +inf.

Faults (rates are per request, drawn from a seed whose first draw is clean so
that the preflight request itself is never hit; its own fault handling is
tested in tests/e2e/test_preflight_dialects.py):

* ``http_500``: HTTP 500 at 10%;
* ``rate_limit``: 429 + Retry-After when more than a few requests would queue
  for a batch of fewer slots than users;
* ``cut``: streams cut mid-way at 5%;
* ``malformed``: one corrupt chunk mid-way at 5%;
* ``stall``: a 2 s pause mid-way at 5% (below the timeout: the requests succeed, slowly);
* ``timeout``: a 3 s pause at 5% with ``timeout_s`` 1.5;
* ``restart``: the mock is killed (SIGKILL) mid-level and restarted 2 s later on its port;
* ``hang``: 5% of requests never get a byte (``timeout_s`` 2).

    python benchmarks/bench_faults.py [--streams 100,200] [--level-duration 20]
                                      [--faults http_500,...] [--json PATH]

Above 100 streams (``--distributed-above``) the load runs as ``--workers 2``. The table prints, per fault
and load: requests the server saw, records, records by kind, and ``missing``
(requests the server saw that no record accounts for; must be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from _table import Column, format_table, write_json

from loadtest.mock.arrival_log import count_arrivals
from loadtest.mock.config import MockConfig
from loadtest.mock.faults import NO_FAULTS, FaultInjector
from loadtest.mock.process import MockServer
from loadtest.records import read_requests, read_run_json

# the reconciliation rules are test code (tests/support/reconcile.py), not part of the package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.reconcile import reconcile  # noqa: E402

#: The engine: 20 ms steps, 2 tokens per chunk, 32 tokens per request: 100 streams
#: make ~2,500 chunks/s, a quarter of one client process's documented capacity, so
#: the faults, not the client, are what is tested.
ENGINE = ["--decode-base-ms", "20", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0",
          "--tokens-per-chunk", "2"]
MAX_TOKENS = 32
#: The error budget of every fault run: each fault's rate is above it.
ERROR_BUDGET = 0.01


@dataclass(frozen=True)
class Fault:
    name: str
    mock: list[str]
    timeout_s: float = 10.0
    restart: bool = False
    #: The record kinds this fault may produce besides ok and cancelled.
    kinds: tuple[str, ...] = ()
    #: Whether the error budget must fail (a stall below the timeout is slow, not failed).
    fails_budget: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def faults_for(streams: int) -> list[Fault]:
    # At N users and N/2 slots the queue is N/2 deep; refuse beyond a quarter of it.
    slots, queue = max(1, streams // 2), max(1, streams // 8)
    return [
        Fault("http_500", ["--fail-rate", "0.1"], kinds=("http_5xx",)),
        Fault("rate_limit", ["--max-batch", str(slots), "--rate-limit-queue", str(queue),
                             "--retry-after-s", "1"], kinds=("rate_limited",)),
        Fault("cut", ["--drop-rate", "0.05"], kinds=("disconnect",)),
        Fault("malformed", ["--malformed-rate", "0.05"], kinds=("malformed",)),
        Fault("stall", ["--stall-rate", "0.05", "--stall-s", "2"], fails_budget=False),
        Fault("timeout", ["--stall-rate", "0.05", "--stall-s", "3"], timeout_s=1.5, kinds=("timeout",)),
        # unanswered: a connection the killed mock's kernel had accepted, closed before any byte (reconcile.py)
        Fault("restart", [], restart=True, kinds=("connect", "disconnect", "unanswered")),
        Fault("hang", ["--hang-rate", "0.05"], timeout_s=2.0, kinds=("timeout",)),
    ]


def clean_first_seed(flags: list[str]) -> int:
    """The smallest seed whose first fault draw (the preflight's) hits nothing."""
    args = argparse.Namespace(**_mock_namespace(flags))
    for seed in range(1, 1000):
        if FaultInjector(MockConfig.from_args(args).replace(seed=seed)).draw() == NO_FAULTS:
            return seed
    raise RuntimeError("no clean seed below 1000")


def _mock_namespace(flags: list[str]) -> dict[str, Any]:
    from loadtest.mock.cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return vars(parser.parse_args(flags))


def write_scenario(folder: Path, base_url: str, fault: Fault, streams: int, seconds: float) -> Path:
    data = {
        "name": f"fault-{fault.name}",
        "target": {"base_url": base_url, "model": "mock-model", "api": "chat", "timeout_s": fault.timeout_s},
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": MAX_TOKENS},
        "load": {"levels": [streams], "level_duration_s": seconds, "min_level_duration_s": seconds,
                 "max_level_duration_s": seconds, "warmup_s": min(2.0, seconds / 4), "warmup_requests": 0},
        "slo": {"ttft_ms": {"p95": 5000}, "itl_ms": {"p95": 5000}, "max_error_rate": ERROR_BUDGET},
    }
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_fault(fault: Fault, streams: int, seconds: float, folder: Path, workers: int = 0) -> dict[str, Any]:
    """One run against one fault (``workers`` > 0: a master and that many workers); a row of the matrix."""
    folder.mkdir(parents=True, exist_ok=True)
    seed = clean_first_seed([*ENGINE, *fault.mock])
    logs = [folder / "arrivals-1.log"]
    argv = [*ENGINE, *fault.mock, "--seed", str(seed), "--arrival-log", str(logs[0])]
    out = folder / "run"
    distributed = ["--workers", str(workers)] if workers else []
    started = time.monotonic()
    with MockServer(argv, startup_timeout=30) as mock:
        scenario = write_scenario(folder, mock.base_url, fault, streams, seconds)
        cmd = [sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(out), *distributed]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
        second: MockServer | None = None
        try:
            if fault.restart:
                second = _kill_and_restart(mock, argv, logs, folder, out, seconds)
            stdout, stderr = proc.communicate(timeout=seconds * 3 + 120)
            server = (second or mock).outcomes()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            if second is not None:
                second.stop()
    row = _row(fault, streams, out, proc.returncode, stderr, logs, server, time.monotonic() - started)
    return {**row, "workers": workers, "run_dir": str(out)}


def _kill_and_restart(mock: MockServer, argv: list[str], logs: list[Path], folder: Path,
                      out: Path, seconds: float) -> MockServer:
    """SIGKILL the mock a third into the level, then start it again on its port 2 s later."""
    _wait_for_level(out)
    time.sleep(seconds / 3)
    assert mock.pid is not None
    os.kill(mock.pid, signal.SIGKILL)
    time.sleep(2.0)
    logs.append(folder / "arrivals-2.log")
    restarted = [*argv[:-1], str(logs[1]), "--port", str(mock.port)]
    return MockServer(restarted, startup_timeout=30).start()


def _wait_for_level(out: Path, timeout: float = 60) -> None:
    """Until the first level has started (its records flushed to a part file), bounded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not list((out / "requests.parts").glob("*.parquet")):
        time.sleep(0.1)


def _row(fault: Fault, streams: int, out: Path, rc: int | None, stderr: str, logs: list[Path],
         server: dict[str, int], wall_s: float) -> dict[str, Any]:
    records = read_requests(out)
    run = read_run_json(out)
    summary = json.loads((out / "summary.json").read_text())
    rec = reconcile(
        records,
        # the preflight's tries, and the one request after the load of a run that ended on unanswered
        # requests (run.json's after_load, loadtest/after_load.py): requests of the run's, not records
        preflight_attempts=[*run.get("preflight", {}).get("attempts", []), *([run["after_load"]] if run.get("after_load") else [])],
        # After a kill -9 the first server's outcome counts died with it: totals only.
        server_outcomes=None if fault.restart else server,
        server_arrivals=sum(count_arrivals(str(p)) for p in logs),
    )
    level = summary["levels"][0]
    problems = list(rec.problems)
    # a restart that the run's end overtook (the mock still starting, nothing answered again) is an
    # outage at the end: `run` says so and exits 3 (analysis/target_lost.py), whatever else was right
    ended_down = fault.restart and rc == 3 and summary.get("target_lost") is not None
    if rc != 0 and not ended_down:
        problems.append(f"loadtest run exited {rc}: {stderr.strip().splitlines()[-1:]}")
    unexpected = set(rec.client) - {"ok", "cancelled", *fault.kinds}
    if unexpected:
        problems.append(f"unexpected record kinds {sorted(unexpected)}")
    problems += _analysis_problems(fault, level)
    return {
        "fault": fault.name,
        "streams": streams,
        "server_seen": rec.server_seen,
        "recorded": rec.recorded,
        "by_kind": dict(sorted(rec.client.items())),
        "kinds": " ".join(f"{k}={n}" for k, n in sorted(rec.client.items())),
        "server_outcomes": dict(sorted(server.items())) if not fault.restart else None,
        "missing": rec.missing,
        "invented": rec.invented,
        "error_rate": level.get("error_rate"),
        "budget": _budget_status(level),
        "ttft_failed": (level.get("ttft_ms") or {}).get("n_failed"),
        "e2e_failed": (level.get("e2e_ms") or {}).get("n_failed"),
        "e2e_p99": (level.get("e2e_ms") or {}).get("p99"),
        "ttft_p99": (level.get("ttft_ms") or {}).get("p99"),
        "wall_s": round(wall_s, 1),
        "problems": problems,
        "ok": not problems,
    }


def _budget_status(level: dict[str, Any]) -> str | None:
    for check in level.get("checks", []):
        if check.get("name") == "error_rate":
            return check.get("verdict")
    return None


def _analysis_problems(fault: Fault, level: dict[str, Any]) -> list[str]:
    """The analysis of a fault run: the budget fails where it should; failures are +inf."""
    problems = []
    status = _budget_status(level)
    if fault.fails_budget and status != "fail":
        problems.append(f"the error budget check is {status!r}, expected 'fail'")
    if not fault.fails_budget and status == "fail":
        problems.append("the error budget failed where no request failed")
    e2e = level.get("e2e_ms") or {}
    errors = level.get("errors") or 0
    if errors and e2e.get("n_failed", 0) < errors * 0.9:
        problems.append(f"{errors} errors in the level, but only {e2e.get('n_failed')} e2e samples are +inf")
    for metric in ("ttft_ms", "e2e_ms"):
        stats = level.get(metric) or {}
        failed, n = stats.get("n_failed") or 0, stats.get("n") or 0
        if n and failed / n > 0.011 and stats.get("p99") is not None:
            problems.append(f"{failed} of {n} {metric} samples are failures (+inf), yet its p99 is finite")
    return problems


COLUMNS = [
    Column("fault", "fault", left=True),
    Column("streams", "streams"),
    Column("workers", "workers"),
    Column("server_seen", "server saw"),
    Column("recorded", "recorded"),
    Column("missing", "missing"),
    Column("kinds", "recorded by kind", left=True),
    Column("error_rate", "error rate", ".3f"),
    Column("budget", "budget", left=True),
    Column("ttft_failed", "TTFT +inf"),
    Column("e2e_failed", "e2e +inf"),
    Column("ok", "accounted"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="100,200", help="comma-separated loads")
    parser.add_argument("--distributed-above", type=int, default=100,
                        help="loads above this run as --workers 2 (default: %(default)s)")
    parser.add_argument("--keep", default=None, help="keep the run folders under this folder")
    parser.add_argument("--level-duration", type=float, default=20.0)
    parser.add_argument("--faults", default=None, help="comma-separated subset of the faults")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as tmp:
        root = Path(args.keep or tmp)
        for streams in (int(s) for s in args.streams.split(",")):
            workers = 2 if streams > args.distributed_above else 0
            for fault in faults_for(streams):
                if args.faults and fault.name not in args.faults.split(","):
                    continue
                row = run_fault(fault, streams, args.level_duration, root / f"{fault.name}-{streams}", workers)
                rows.append(row)
                print(format_table([row], COLUMNS), flush=True)
                for problem in row["problems"]:
                    print(f"  problem: {problem}", flush=True)
    print()
    print(format_table(rows, COLUMNS))
    if args.json:
        write_json(args.json, {"rows": rows})
    return 0  # the judgement is in the rows ("ok", "problems") and in run_all.py


if __name__ == "__main__":
    sys.exit(main())
