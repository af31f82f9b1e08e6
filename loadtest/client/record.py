"""What one request leaves behind: :class:`RequestRecord`.

Chunk times and token counts are kept in ``array`` objects (raw doubles and
ints), not lists of Python floats: appending to them is cheap on the per-chunk
hot path, and they convert to Arrow list columns without a copy per element.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field

#: Error kinds a record can carry. ``cancelled`` means the harness itself ended
#: the request (the run stopped while it was in flight): it is kept in the
#: records but is not the server's fault.
ERROR_KINDS = (
    "connect",
    "timeout",
    "http_4xx",
    "http_5xx",
    "rate_limited",
    "disconnect",
    "malformed",
    "stream_error",
    "cancelled",
)


@dataclass(slots=True)
class RequestRecord:
    """One request's timing and outcome. Times are ms from the request's send."""

    start_wall: float
    start_perf: float
    ttfb_ms: float = math.nan
    ttft_ms: float = math.nan
    e2e_ms: float = math.nan
    chunk_ms: array = field(default_factory=lambda: array("d"))
    chunk_tokens: array = field(default_factory=lambda: array("i"))
    #: The server's own send time of each content chunk, when it stamps them
    #: (``loadtest mock --stamp-chunks``, same host and clock): the benchmarks'
    #: ground truth for each chunk's lag. Empty for real servers.
    chunk_sent_ms: array = field(default_factory=lambda: array("d"))
    prompt_tokens: int | None = None
    completion_tokens: int = 0
    token_source: str = "chunks"
    status: int = 0
    error_kind: str | None = None
    error: str | None = None
    #: The server's Retry-After on a 429, in seconds (not persisted: it steers back-off).
    retry_after_s: float | None = None
    #: The generated text, piece by piece, when the caller asked for it (a
    #: conversation resends it next turn). Not persisted; None when not asked.
    text: list[str] | None = None

    @property
    def answer(self) -> str:
        """The generated text ("" when it was not captured)."""
        return "".join(self.text) if self.text else ""

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    def fail(self, kind: str, message: str) -> None:
        """Mark the request failed; the first failure wins (it is the cause)."""
        if self.error_kind is None:
            self.error_kind = kind
            self.error = message[:500]
