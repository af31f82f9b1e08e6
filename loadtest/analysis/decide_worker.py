"""``python -m loadtest.analysis.decide_worker``: judge running levels in a process of their own.

The load process asks, at every look, whether the running level is decided
(:func:`loadtest.analysis.decide.decide_level`). Answering means reading the
records so far and running the analysis: tens of milliseconds for a small run,
and far more for a large one, much of it inside pandas and Arrow with the
interpreter lock held. In the load process that would hold back the thread
that stamps chunks and the greenlets that send requests, exactly while the
level is being measured. Here it holds only this process's lock.

The protocol is one JSON line each way: first a configuration line (``run_dir``,
``slo``, ``confidence``), then per look a request (``run``: run.json so far,
``level``: the running level, ``now``: wall time, ``in_flight``: columns of the
requests still running) answered by ``{"verdict", "why", "check", "observed"}`` or ``{"error"}``.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import IO, Any

import pandas as pd

from loadtest.analysis.decide import decide_level
from loadtest.analysis.slo import SloSpec
from loadtest.records_stream import read_level


def answer(request: dict[str, Any], run_dir: str, slo: SloSpec, confidence: float) -> dict[str, Any]:
    """One look: the verdict of ``request["level"]`` on the records on disk plus those in flight."""
    in_flight = pd.DataFrame(request["in_flight"]) if request.get("in_flight") else None
    level = request["level"]
    decision = decide_level(  # the running level's records only: the decision reads no other
        read_level(run_dir, int(level["index"])), request["run"], slo, level, float(request["now"]), confidence, in_flight
    )
    return {"verdict": decision.verdict, "why": decision.why, "check": decision.check,
            "observed": {key: list(pair) for key, pair in decision.observed.items()}}


def serve(stdin: IO[str], stdout: IO[str]) -> None:
    config = json.loads(stdin.readline())
    slo = SloSpec.from_dict(config["slo"])
    confidence = float(config["confidence"])
    for line in stdin:
        try:
            reply = answer(json.loads(line), config["run_dir"], slo, confidence)
        except Exception as err:  # one bad look must not end the judge: the parent gets the error
            reply = {"error": f"{type(err).__name__}: {err}"}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


if __name__ == "__main__":
    # Ctrl-C reaches the whole process group: the judge answers until its stdin closes (the run
    # stops it), rather than printing a KeyboardInterrupt traceback over the run's last lines.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(sys.stdin, sys.stdout)
