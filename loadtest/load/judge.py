"""The level judge, out of process: the load stage asks it at every look.

A thin client of :mod:`loadtest.analysis.decide_worker`: one child process per
run, started with the load (its imports overlap the preflight), asked one
JSON line per look over a pipe. The greenlet that asks waits cooperatively, so
users keep sending and the reader thread keeps stamping while the analysis
runs elsewhere. If the child cannot answer (it died, or took longer than
:data:`ANSWER_TIMEOUT_S`), the caller gets an exception and judges in a thread
instead: slower to the interpreter, never a lost run.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import gevent
from gevent import subprocess

from loadtest.analysis.decide import Decision

#: The longest one look may take before the judge is given up on.
ANSWER_TIMEOUT_S = 60.0


class JudgeError(RuntimeError):
    """The judge process could not answer."""


class JudgeProcess:
    """``decide()`` per look; ``close()`` at the end of the run (idempotent)."""

    def __init__(self, run_dir: Path, slo: dict[str, Any], confidence: float) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "loadtest.analysis.decide_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        self._send({"run_dir": str(run_dir), "slo": slo, "confidence": confidence})

    def _send(self, payload: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(payload, default=_json_default) + "\n")
        self._proc.stdin.flush()

    def decide(self, run: dict[str, Any], level: dict[str, Any], now: float, in_flight: dict[str, list]) -> Decision:
        if self._proc.poll() is not None:
            raise JudgeError(f"the judge process exited with {self._proc.returncode}")
        try:
            with gevent.Timeout(ANSWER_TIMEOUT_S, JudgeError(f"no answer within {ANSWER_TIMEOUT_S:g} s")):
                self._send({"run": run, "level": level, "now": now, "in_flight": in_flight})
                assert self._proc.stdout is not None
                line = self._proc.stdout.readline()
        except (OSError, ValueError) as err:
            raise JudgeError(f"the judge process is gone ({err})") from None
        if not line:
            raise JudgeError("the judge process closed its output")
        reply = json.loads(line)
        if "error" in reply:
            raise JudgeError(reply["error"])
        return Decision(reply["verdict"], reply["why"], reply.get("check"))

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.close()
                self._proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - closing must never fail the run
                self._proc.kill()


def _json_default(value: Any) -> Any:
    """numpy scalars and arrays in the in-flight columns; NaN stays NaN (Python's JSON allows it)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return value
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
