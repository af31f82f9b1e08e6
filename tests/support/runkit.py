"""Helpers for end-to-end tests: scenario files and the real ``loadtest`` command.

Everything here drives the real CLI in a subprocess against a real
``loadtest mock`` on 127.0.0.1; every call is bounded by a timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml


#: The gate's exit code for each outcome in compare.json (README "Exit codes", without
#: ``--inconclusive``): the codes a comparison may end with when it gets to a verdict. A test
#: whose subject is what the gate writes, not its verdict, accepts any of them (docs/testing.md).
GATE_VERDICTS = {0: "pass", 1: "regression", 6: "inconclusive"}


def deep_update(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Merge ``extra`` into ``base``, mappings key by key; an empty mapping replaces.

    ``{}`` replaces rather than merges because that is what it means in a
    scenario: ``slo: {ttft_ms: {}}`` is "no TTFT objective". Merged, it kept the
    default ``ttft_ms: {p95: 1000}``, and a level with a per-request p95 waits
    for 20 finished requests before its first look (docs/testing.md).
    """
    for key, value in extra.items():
        if isinstance(value, dict) and value and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = value
    return base


def write_scenario(folder: Path, base_url: str, **sections: Any) -> Path:
    """A small scenario against ``base_url``; keyword sections override the defaults."""
    data: dict[str, Any] = {
        "name": "test",
        "target": {"base_url": base_url, "model": "mock-model", "api": "chat", "timeout_s": 10},
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 16},
        "load": {"levels": [1, 2, 4], "level_duration_s": 4, "warmup_s": 1, "warmup_requests": 0,
                 # These tests are about what is measured and found, on a shared 2-core CI
                 # machine; the self-check's own calibration is benchmarks/bench_fidelity.py.
                 "client_limits": {"loop_lag_p99_ms": 50, "reader_batch_p99_ms": 50, "cpu_pct": 100}},
        "slo": {"ttft_ms": {"p95": 1000}, "itl_ms": {"p95": 1000}, "max_error_rate": 0.5},
    }
    deep_update(data, sections)
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def loadtest(*args: str, timeout: float = 180, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the ``loadtest`` command; the test sees its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "loadtest", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def start_run(scenario: Path, out: Path, *extra: str) -> subprocess.Popen:
    """``loadtest run`` in the background (for tests that stop it mid-way), with faulthandler on:
    ``procs.communicate_or_dump`` can then show where a run that does not stop is stuck.

    The run gets SIGINT's default handling even when this process ignores SIGINT: a shell without
    job control starts a background command (``make test &``) with SIGINT ignored, a child keeps an
    ignored signal ignored across exec, and Python then installs no KeyboardInterrupt handler, so
    a test's Ctrl-C would never reach the run (found when a clean-clone suite was started so)."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN and threading.current_thread() is threading.main_thread()
    if ignored:  # (a handled signal is reset to its default at exec, an ignored one is not)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(out), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def wait_for_flushes(out: Path, parts: int, timeout: float = 60) -> None:
    """Wait (bounded) until the run has flushed ``parts`` batches of records to disk."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(list((out / "requests.parts").glob("*.parquet"))) < parts:
        time.sleep(0.2)


def summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


def level_rows(frame, level: int):
    """Successful, measured (non-warmup) records of one concurrency level."""
    return frame[(frame.level == level) & frame.ok & ~frame.warmup]


def copy_as_another_run(src: Path, dst: Path, later_s: float = 86_400.0) -> Path:
    """A copy of a run folder that the gate takes for another run of the same workload: its start
    moved ``later_s`` on in run.json and summary.json. The gate refuses a plain copy as the same run
    (``compare/inputs.run_identity``: a run compared with itself always passes)."""
    import shutil

    shutil.copytree(src, dst)
    run = json.loads((dst / "run.json").read_text())
    run["started_wall"] = float(run["started_wall"]) + later_s
    (dst / "run.json").write_text(json.dumps(run))
    if (dst / "summary.json").is_file():
        summary = json.loads((dst / "summary.json").read_text())
        if (summary.get("run") or {}).get("started_wall") is not None:
            summary["run"]["started_wall"] = float(summary["run"]["started_wall"]) + later_s
            (dst / "summary.json").write_text(json.dumps(summary))
    return dst
