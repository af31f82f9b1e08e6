"""What one request leaves behind: :class:`RequestRecord`.

Chunk times and token counts are kept in ``array`` objects (raw doubles and
ints), not lists of Python floats: appending to them is cheap on the per-chunk
hot path, and they convert to Arrow list columns without a copy per element.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field

from loadtest.redact import scrub

#: Error kinds a record can carry. ``cancelled`` means the harness itself ended
#: the request (the run stopped while it was in flight): it is kept in the
#: records but is not the server's fault. ``aborted``: the server ended the
#: stream with ``finish_reason: abort``; ``empty``: a 200 stream without a
#: single content chunk; ``http_3xx``: a redirect (never followed for a POST);
#: ``client_error``: the request could not even be sent (a bug or a bad header).
#: ``dropped``: an open-loop arrival found ``load.max_in_flight`` requests in
#: flight and was never sent (it counts against the error budget).
ERROR_KINDS = (
    "connect",
    "timeout",
    "http_3xx",
    "http_4xx",
    "http_5xx",
    "rate_limited",
    "disconnect",
    "malformed",
    "stream_error",
    "aborted",
    "empty",
    "client_error",
    "cancelled",
    "dropped",
)


def answered_nothing(error_kind: str | None, status: int) -> bool:
    """A failure the target answered nothing to: refused (``connect``), or a connection closed
    before the response head (``disconnect`` without an HTTP status).

    Why both: a dead server gives refusals, but its last accepted connections, and every
    connection through a tunnel or TCP proxy to it (``ssh -L``, socat), are made and then
    closed unanswered. A user backs off after either, and a run that ends on them lost its
    target (``analysis/target_lost.py``); a stream cut after its head is a live server's (or a
    proxy's) answer, and is neither.
    """
    return error_kind == "connect" or (error_kind == "disconnect" and not status)


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
    #: Prompt tokens the server served from its prefix cache (usage.prompt_tokens_details.cached_tokens,
    #: or llama.cpp's timings.cache_n); None when it does not say.
    cached_tokens: int | None = None
    completion_tokens: int = 0
    token_source: str = "chunks"
    #: usage.completion_tokens_details.reasoning_tokens, when the server sent it.
    #: Hidden reasoning is not in ``completion_tokens`` (see decode.settle_tokens).
    reasoning_tokens: int | None = None
    #: Times the request was sent again on a fresh connection because the reused
    #: keep-alive connection turned out closed before any response byte (0 or 1).
    resends: int = 0
    status: int = 0
    error_kind: str | None = None
    error: str | None = None
    #: The server's Retry-After on a 429, in seconds (not persisted: it steers back-off).
    retry_after_s: float | None = None
    #: The server's own per-request ``timings`` when it sends them (llama.cpp:
    #: prompt_ms, predicted_ms, predicted_n …); not persisted, for cross-checks.
    server_timings: dict | None = None
    #: The generated text, piece by piece, when the caller asked for it (a
    #: conversation resends it next turn). Not persisted; None when not asked.
    text: list[str] | None = None
    #: The streamed tool calls by their index, ``[name, arguments pieces...]``, when the text
    #: was captured (a structured-output check reads them). Not persisted.
    tool_calls: dict[int, list[str]] | None = None
    #: Did the answer pass the request's structured-output check (valid tool-call JSON, or
    #: output that validates against the schema)? None: nothing was checked (no check asked,
    #: or the request failed).
    output_valid: bool | None = None
    #: Inputs in the request (embeddings: the batch size); None for chat and completions.
    items: int | None = None

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
            self.error = scrub(message)[:500]  # a server may echo the key back: never keep it
