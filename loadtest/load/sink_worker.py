"""The record writer process: ``python -m loadtest.load.sink_worker RUN_DIR FIRST_PART``.

Started by :class:`loadtest.load.sink.RunSink`, one per run. It reads flushed
batches from stdin (:mod:`loadtest.load.sink_frames`), and for each one does
the work that used to hold the timing process's GIL for several milliseconds a
second: decode it into an Arrow table, fold it into the live figures
(:class:`~loadtest.load.progress.RunProgress`), write and fsync the Parquet
part file; with ``--metrics-port``, bucket it for the live metrics too. Then it
answers one JSON line: how far the part files got, the figures of the levels the
batch touched, and that bucketing.

It stops at the end of its input. Should anything fail (a write error, a full
disk, a bug), it says which batch and exits: the sender then stores that batch
and every later one itself, exactly as it did before this process existed, so
the outcome (a disk-full stop, an error raised at drain) is the one it always was.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from loadtest.export.live import observation, observation_to_json
from loadtest.load.batch import decode_table
from loadtest.load.look_rows import LOOKS_OPEN, RowsAwaitingLook
from loadtest.load.progress import WINDOW_ENDS, RunProgress
from loadtest.load.sink_frames import OBSERVE, failed_line, read_frame, stored_line
from loadtest.records import RequestWriter


def serve(run_dir: Path, first_part: int, inp, out) -> int:
    """Store every frame of ``inp``, answering on ``out``; 0 at the end of input, 1 after a failure."""
    writer = RequestWriter(run_dir)
    writer.next_part = first_part
    progress = RunProgress()
    awaiting = RowsAwaitingLook()  # the live figures' rows an open look has yet to place
    while True:
        got = read_frame(inp)
        if got is None:
            return 0
        seq, batch = got
        try:
            table = decode_table(batch)
            placed = awaiting.settle(table, batch.get(WINDOW_ENDS), batch.get(LOOKS_OPEN))
            touched = progress.update(placed, batch.get(WINDOW_ENDS), arrived=table.num_rows)
            writer.write(table)
            observed = observation(placed, batch.get(WINDOW_ENDS)) if batch.get(OBSERVE) else None
            out.write(stored_line(seq, writer.next_part, progress.total, progress.figures(touched),
                                  observation_to_json(observed) if observed is not None else None))
            out.flush()
        except Exception as err:  # noqa: BLE001 - any failure hands the batch back to the sender
            out.write(failed_line(seq, err))
            out.flush()
            return 1


def main(argv: list[str] | None = None) -> int:
    # Ctrl-C reaches the whole process group: the writer keeps writing what the run sends until its
    # stdin closes (the run's end or death), so no measured batch is lost to a KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    args = sys.argv[1:] if argv is None else argv
    return serve(Path(args[0]), int(args[1]), sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())
