"""A columnar buffer of records, and its compact encoding for the wire.

Records pile up here between flushes. Scalars go into one list per column and
chunk data into flat arrays plus offsets, so a batch is a handful of
arrays (not a dict per chunk): cheap to send from a Locust worker to the master
with ``runner.send_message`` and cheap to turn into an Arrow table.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from loadtest.client.record import RequestRecord
from loadtest.records import SCHEMA

if TYPE_CHECKING:
    from loadtest.load.open_loop import Slot

_SCALARS = (
    "request_id", "worker", "user", "level", "level_index", "warmup", "start_wall",
    "ttfb_ms", "ttft_ms", "e2e_ms", "prompt_tokens", "completion_tokens", "token_source",
    "status", "ok", "error_kind", "error", "reasoning_tokens", "resends",
    "class", "turn", "conversation_id", "prompt_token_source",
    "rate_rps", "scheduled_wall", "schedule_lag_ms", "server_prompt_ms", "server_predicted_per_token_ms",
    "output_valid", "items", "images", "image_bytes",
    "cached_tokens", "prompt_tokens_asked",
)


def _number(value: Any) -> float | None:
    """A server-sent timing as a float, or None when absent or not a number."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class RecordBuffer:
    """Accumulates tagged records until :meth:`take` empties it."""

    def __init__(self, worker: str) -> None:
        self.worker = worker
        self._seq = 0
        self._reset()

    def _reset(self) -> None:
        self._cols: dict[str, list] = {name: [] for name in _SCALARS}
        self._chunk_ms = array("d")
        self._chunk_tokens = array("i")
        self._offsets = array("q", [0])
        self._sent_ms = array("d")
        self._sent_offsets = array("q", [0])

    def __len__(self) -> int:
        return len(self._cols["request_id"])

    def add(
        self,
        rec: RequestRecord,
        *,
        user: int,
        level: int,
        level_index: int,
        warmup: bool,
        request_class: str | None = None,
        turn: int | None = None,
        conversation_id: str | None = None,
        prompt_words: int | None = None,
        prompt_source: str = "estimate",
        slot: "Slot | None" = None,
        images: int | None = None,
        image_bytes: int | None = None,
    ) -> None:
        """Append one record with its tags; without ``usage`` the prompt's word count stands in.

        ``slot`` is its open-loop arrival (None in closed loop).
        """
        cols = self._cols
        self._seq += 1
        cols["request_id"].append(f"{self.worker}-{self._seq}")
        cols["worker"].append(self.worker)
        cols["user"].append(user)
        cols["level"].append(level)
        cols["level_index"].append(level_index)
        cols["warmup"].append(warmup)
        cols["start_wall"].append(rec.start_wall)
        cols["ttfb_ms"].append(rec.ttfb_ms)
        cols["ttft_ms"].append(rec.ttft_ms)
        cols["e2e_ms"].append(rec.e2e_ms)
        if rec.prompt_tokens is not None:
            cols["prompt_tokens"].append(rec.prompt_tokens)
            cols["prompt_token_source"].append("usage")
        else:
            cols["prompt_tokens"].append(prompt_words)
            cols["prompt_token_source"].append(prompt_source if prompt_words is not None else None)
        cols["completion_tokens"].append(rec.completion_tokens)
        cols["token_source"].append(rec.token_source)
        cols["status"].append(rec.status)
        cols["ok"].append(rec.ok)
        cols["error_kind"].append(rec.error_kind)
        cols["error"].append(rec.error)
        cols["reasoning_tokens"].append(rec.reasoning_tokens)
        cols["cached_tokens"].append(rec.cached_tokens)
        cols["prompt_tokens_asked"].append(prompt_words)
        cols["resends"].append(rec.resends)
        cols["class"].append(request_class)
        cols["turn"].append(turn)
        cols["conversation_id"].append(conversation_id)
        if slot is None:
            cols["rate_rps"].append(None)
            cols["scheduled_wall"].append(None)
            cols["schedule_lag_ms"].append(None)
        else:
            cols["rate_rps"].append(slot.rate_rps)
            cols["scheduled_wall"].append(slot.wall)
            cols["schedule_lag_ms"].append(slot.lag_ms(rec))
        timings = rec.server_timings or {}
        cols["server_prompt_ms"].append(_number(timings.get("prompt_ms")))
        cols["server_predicted_per_token_ms"].append(_number(timings.get("predicted_per_token_ms")))
        cols["output_valid"].append(rec.output_valid)
        cols["items"].append(rec.items)
        cols["images"].append(images)
        cols["image_bytes"].append(image_bytes)
        self._chunk_ms.extend(rec.chunk_ms)
        self._chunk_tokens.extend(rec.chunk_tokens)
        self._offsets.append(len(self._chunk_ms))
        self._sent_ms.extend(rec.chunk_sent_ms)
        self._sent_offsets.append(len(self._sent_ms))

    def take(self) -> dict[str, Any]:
        """Empty the buffer into the compact encoding (plain lists and bytes)."""
        encoded: dict[str, Any] = dict(self._cols)
        encoded["chunk_ms"] = self._chunk_ms.tobytes()
        encoded["chunk_tokens"] = self._chunk_tokens.tobytes()
        encoded["offsets"] = self._offsets.tobytes()
        encoded["chunk_sent_ms"] = self._sent_ms.tobytes()
        encoded["sent_offsets"] = self._sent_offsets.tobytes()
        self._reset()
        return encoded


def decode_table(encoded: dict[str, Any]) -> pa.Table:
    """Turn an encoded batch (local or from a worker) into an Arrow table in SCHEMA.

    The flat chunk arrays go in through numpy views of their bytes: Arrow takes
    those in one copy, where a ``memoryview`` would be read as a sequence, one
    Python float at a time inside a single C call that holds the GIL (4 ms for
    20,000 chunks, a late chunk for every stream the event loop then stamps).
    """
    offsets = pa.array(np.frombuffer(encoded["offsets"], dtype=np.int64), type=pa.int32())
    chunk_ms = pa.array(np.frombuffer(encoded["chunk_ms"], dtype=np.float64), type=pa.float64())
    chunk_tokens = pa.array(np.frombuffer(encoded["chunk_tokens"], dtype=np.intc), type=pa.int32())
    sent_offsets = pa.array(np.frombuffer(encoded["sent_offsets"], dtype=np.int64), type=pa.int32())
    sent_ms = pa.array(np.frombuffer(encoded["chunk_sent_ms"], dtype=np.float64), type=pa.float64())
    arrays = []
    for field in SCHEMA:
        if field.name == "chunk_ms":
            arrays.append(pa.ListArray.from_arrays(offsets, chunk_ms))
        elif field.name == "chunk_tokens":
            arrays.append(pa.ListArray.from_arrays(offsets, chunk_tokens))
        elif field.name == "chunk_sent_ms":
            arrays.append(pa.ListArray.from_arrays(sent_offsets, sent_ms))
        else:
            arrays.append(pa.array(encoded[field.name], type=field.type, from_pandas=True))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)
