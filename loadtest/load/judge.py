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
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from gevent import subprocess

from loadtest.analysis.decide import Decision, decide_level
from loadtest.analysis.slo import SloSpec
from loadtest.records_stream import read_level

_log = logging.getLogger(__name__)

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
        observed = {key: (float(v), float(limit)) for key, (v, limit) in (reply.get("observed") or {}).items()}
        return Decision(reply["verdict"], reply["why"], reply.get("check"), observed)

    def end_input(self) -> None:
        """Close the child's input: it exits on its own (an interpreter's teardown, ~0.2 s), while
        the caller stops the rest of the run; :meth:`close` then waits for it (idempotent)."""
        try:
            if self._proc.stdin is not None and not self._proc.stdin.closed:
                self._proc.stdin.close()
        except OSError:  # already gone: close() sees to it
            pass

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self.end_input()
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


class LevelJudge:
    """What the shape calls at each look: the verdict of the running level so far.

    The records are flushed first (``read_in_flight`` does that and returns the
    requests in flight, the processes' latest snapshots, which are passed in as
    censored requests). The analysis runs in a child process
    (:class:`JudgeProcess`) so that it holds neither the event loop nor the
    interpreter lock the chunk stamps need. Should the child fail (or not
    start), a look is judged in a native thread instead; should judging itself
    fail, the level is "uncertain" and runs its full course.
    """

    def __init__(self, run_dir: Path, slo: dict[str, Any], confidence: float, run_json, read_in_flight) -> None:
        """``run_json()``: run.json as it stands; ``read_in_flight()``: the requests in flight now."""
        self.run_dir = run_dir
        self.slo = SloSpec.from_dict(slo)
        self.confidence = confidence
        self.run_json = run_json
        self.read_in_flight = read_in_flight
        self.child: JudgeProcess | None = None
        try:
            self.child = JudgeProcess(run_dir, slo, confidence)
        except OSError as err:
            _log.warning("could not start the judge process (%s); levels are judged in a thread", err)

    def __call__(self, span) -> Decision:
        in_flight = self.read_in_flight()
        run = self.run_json()
        try:
            if self.child is not None:
                try:
                    columns = in_flight.to_dict(orient="list") if len(in_flight) else {}
                    return self.child.decide(run, span.to_json(), span.looked_at or time.time(), columns)
                except JudgeError as err:
                    _log.warning("the judge process failed (%s); judging in a thread from now on", err)
                    self.child.close()
                    self.child = None
            return self.in_thread(span, run, in_flight)
        except Exception as err:  # a bug in judging must not stop the run: the level runs its full course
            _log.exception("could not judge level %s", span.index)
            return Decision("uncertain", f"could not judge the level ({type(err).__name__}: {err})")

    def in_thread(self, span, run: dict[str, Any], in_flight) -> Decision:
        """The look judged here, in gevent's native thread pool (the event loop keeps running)."""
        def work() -> Decision:
            frame = in_flight if len(in_flight) else None
            now = span.looked_at or time.time()
            records = read_level(self.run_dir, span.index)  # the running level's only, as the judge process reads
            return decide_level(records, run, self.slo, span.to_json(), now, self.confidence, frame)

        return gevent.get_hub().threadpool.apply(work)

    def end_input(self) -> None:
        """The judge process may start ending (no more looks); see :meth:`JudgeProcess.end_input`."""
        if self.child is not None:
            self.child.end_input()

    def close(self) -> None:
        if self.child is not None:
            self.child.close()
