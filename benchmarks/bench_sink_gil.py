"""How much the record sink's per-flush work stalls the timing process's other threads (the GIL).

On a local run the sink (loadtest/load/sink.py) decodes each one-second flush
into an Arrow table, updates the live progress and writes the part file, in a
thread of the process whose event loop stamps chunks. Python code there is
preempted every switch interval (0.5 ms, load/session.py), but a single C call
that holds the GIL is not: a chunk that arrives meanwhile is stamped late.

This measures each step on synthetic flushes (``--records`` × ``--chunks``):
its CPU time, and the worst wake-up delay of a ticker thread that sleeps
0.1 ms in a loop meanwhile (the stall another thread sees). The ``idle`` row
is the ticker alone: on a shared machine its delays are the floor that the
scheduler adds whatever the sink does.

The last two rows are the whole flush as the timing process pays for it:
``in this process`` is the three steps back to back (the sink before the record
writer process, and its fallback); ``to the writer process`` is what is left
here now (encode the batch, write it down the pipe to a running
:mod:`loadtest.load.sink_worker`, which does the three steps).

    python benchmarks/bench_sink_gil.py [--records 200] [--chunks 100] [--flushes 20] [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from array import array
from pathlib import Path
from typing import Any, Callable

from _table import Column, format_table, write_json

import gevent

from loadtest.client.record import RequestRecord
from loadtest.load.batch import RecordBuffer, decode_table
from loadtest.load.progress import RunProgress
from loadtest.load.session import SWITCH_INTERVAL_S
from loadtest.load.sink_child import WriterChild
from loadtest.records import RequestWriter


def flush(records: int, chunks: int) -> dict[str, Any]:
    """One encoded flush, as the recorder hands it to the sink."""
    buffer = RecordBuffer("local")
    for i in range(records):
        rec = RequestRecord(start_wall=time.time(), start_perf=time.perf_counter(), ttfb_ms=50.0, ttft_ms=60.0,
                            e2e_ms=60.0 + 10.0 * chunks, chunk_ms=array("d", (60.0 + 10.0 * j for j in range(chunks))),
                            chunk_tokens=array("i", [1] * chunks), prompt_tokens=100, completion_tokens=chunks,
                            token_source="usage", status=200)
        buffer.add(rec, user=i, level=records, level_index=0, warmup=False)
    return buffer.take()


class Ticker:
    """A thread that sleeps 0.1 ms in a loop and keeps each wake-up's delay."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            t = time.perf_counter()
            time.sleep(0.0001)
            self.delays.append(time.perf_counter() - t)

    def stop(self) -> None:
        self._stop = True
        self._thread.join()


def measure(step: Callable[[], None], ticker: Ticker) -> tuple[float, float]:
    """(CPU ms of ``step`` in this thread, the ticker's worst delay in ms meanwhile)."""
    ticker.delays.clear()
    cpu = time.thread_time()
    step()
    cpu = time.thread_time() - cpu
    seen = len(ticker.delays)
    while len(ticker.delays) <= seen:  # the wake-up that was due during the step, however late
        time.sleep(0.0002)
    return cpu * 1000.0, max(ticker.delays[: seen + 1]) * 1000.0


COLUMNS = [
    Column("step", "step", left=True),
    Column("cpu_ms", "CPU ms (median)", ".2f"),
    Column("stall_ms", "worst stall ms (median)", ".2f"),
    Column("stall_max_ms", "worst stall ms (max)", ".2f"),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200, help="records per flush (200 streams of 1 s requests)")
    ap.add_argument("--chunks", type=int, default=100, help="chunks per record")
    ap.add_argument("--flushes", type=int, default=20)
    ap.add_argument("--json", type=Path, metavar="PATH")
    args = ap.parse_args(argv)
    sys.setswitchinterval(SWITCH_INTERVAL_S)  # as a run's timing process has it
    flushes = [flush(args.records, args.chunks) for _ in range(args.flushes)]
    samples: dict[str, list[tuple[float, float]]] = {
        "idle": [], "decode_table": [], "progress.update": [], "writer.write": [],
        "flush, in this process": [], "flush, to the writer process": [],
    }
    with tempfile.TemporaryDirectory(prefix="bench-sink-") as tmp, \
            tempfile.TemporaryDirectory(prefix="bench-sink-child-") as child_dir:
        answers: list[dict] = []
        child = WriterChild(Path(child_dir), 0, answers.append, lambda reason: None)
        child.send(0, flush(1, 1))  # started and warm before the measured flushes, as it is by a run's first flush
        waited = time.monotonic()
        while not answers and time.monotonic() - waited < 30.0:
            gevent.sleep(0.05)
        answers.clear()
        ticker = Ticker()
        time.sleep(0.1)
        writer, progress = RequestWriter(Path(tmp)), RunProgress()
        whole_writer, whole_progress = RequestWriter(Path(tmp) / "whole"), RunProgress()

        def in_process(encoded: dict[str, Any]) -> None:
            table = decode_table(encoded)
            whole_progress.update(table)
            whole_writer.write(table)

        for seq, encoded in enumerate(flushes, 1):
            samples["idle"].append(measure(lambda: time.sleep(0.005), ticker))
            table = decode_table(encoded)  # warm, then measured below
            samples["decode_table"].append(measure(lambda: decode_table(encoded), ticker))
            samples["progress.update"].append(measure(lambda: progress.update(table), ticker))
            samples["writer.write"].append(measure(lambda: writer.write(table), ticker))
            samples["flush, in this process"].append(measure(lambda: in_process(encoded), ticker))
            samples["flush, to the writer process"].append(measure(lambda: child.send(seq, encoded), ticker))
            gevent.sleep(0.05)  # the writer's answers are read meanwhile (and it stores the batch off this process)
        ticker.stop()
        child.close()
        gevent.sleep(0.1)
        if len(answers) != len(flushes) or any("failed" in a for a in answers):
            raise SystemExit(f"the writer process stored {len(answers)} of {len(flushes)} flushes: {answers[-1:]}")
    rows = [
        {"step": step, "cpu_ms": statistics.median(c for c, _ in got), "stall_ms": statistics.median(s for _, s in got),
         "stall_max_ms": max(s for _, s in got)}
        for step, got in samples.items()
    ]
    print(f"sink per flush: {args.records} records × {args.chunks} chunks, {args.flushes} flushes, "
          f"switch interval {SWITCH_INTERVAL_S * 1000:g} ms")
    print(format_table(rows, COLUMNS))
    if args.json:
        write_json(args.json, {"benchmark": "sink_gil", "records": args.records, "chunks": args.chunks, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
