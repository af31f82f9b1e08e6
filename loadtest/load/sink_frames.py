"""The record writer's pipe: a flushed batch as one frame, the writer's answer as one line.

The timing process only turns a batch into bytes and writes them (see
:mod:`loadtest.load.sink`); decoding, the live figures and the Parquet part
file happen in the writer process (:mod:`loadtest.load.sink_worker`). A
batch is plain lists and bytes, and :mod:`pickle` takes 200 records × 100
chunks in about 70 µs, well under the switch interval; the write to the pipe
releases the GIL. (:mod:`marshal` is no faster and silently turns a numpy
scalar, which supports the buffer protocol, into bytes.)
"""

from __future__ import annotations

import json
import os
import pickle
import struct
from typing import IO, Any

#: seq, payload length.
HEADER = struct.Struct("<QQ")


def encode_frame(seq: int, batch: dict[str, Any]) -> list[bytes]:
    """A batch's columns (its in-flight snapshot left out: that stays with the sender) as frame pieces."""
    columns = {key: value for key, value in batch.items() if key not in ("in_flight", "source")}
    payload = pickle.dumps(columns, protocol=pickle.HIGHEST_PROTOCOL)
    return [HEADER.pack(seq, len(payload)), payload]


def write_all(fd: int, pieces: list[bytes]) -> None:
    """Write every byte of ``pieces`` to a blocking fd (the GIL is released while the pipe is full)."""
    views = [memoryview(p) for p in pieces if len(p)]
    while views:
        n = os.writev(fd, views)
        while views and n >= len(views[0]):
            n -= len(views[0])
            views.pop(0)
        if views and n:
            views[0] = views[0][n:]


def read_frame(stream: IO[bytes]) -> tuple[int, dict[str, Any]] | None:
    """The next (seq, batch) from the pipe, or None at its end (a cut-off frame is an end too)."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    seq, size = HEADER.unpack(head)
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return seq, pickle.loads(payload)


#: A batch's key asking the writer to bucket it for ``--metrics-port`` too (:func:`loadtest.export.live.observation`).
OBSERVE = "_observe"


def stored_line(seq: int, next_part: int, total: int, levels: dict[int, dict], observed: dict | None = None) -> bytes:
    """The writer's answer for a stored batch: its part count, the run total, the touched levels' figures
    and, when asked (:data:`OBSERVE`), the batch's live-metrics observation."""
    answer: dict[str, Any] = {"seq": seq, "next_part": next_part, "total": total, "levels": levels}
    if observed is not None:
        answer["observed"] = observed
    return (json.dumps(answer) + "\n").encode()


def failed_line(seq: int, err: BaseException) -> bytes:
    """The writer's last answer: it could not store batch ``seq`` (the sender stores it itself from there on)."""
    return (json.dumps({"seq": seq, "failed": f"{type(err).__name__}: {err}"}) + "\n").encode()
