"""Turn a stream's body bytes into a record: the per-chunk hot path.

:class:`StreamDecoder` is fed whatever one socket read returned, with the time
that read returned, and updates the :class:`RequestRecord` in place. It is
shared by both readers (the reactor thread and the greenlet fallback), so the
definition of TTFT, of a content chunk and of token counts lives in one place.

Per chunk it costs one SSE split, one orjson parse (about a microsecond for a
200-byte chunk, cheaper than any byte-level shortcut is worth), a few dict
lookups and two ``array.append`` calls.
"""

from __future__ import annotations

import orjson

from loadtest.client.record import RequestRecord
from loadtest.client.sse import SSEParser
from loadtest.client.wire import Api, chunk_text, read_chunk


class StreamDecoder:
    """SSE body bytes in, chunk times and token counts out."""

    __slots__ = ("rec", "api", "parser", "continuous", "last_completion", "final_completion", "done", "finished", "failed", "capture")

    def __init__(self, rec: RequestRecord, api: Api, capture_text: bool = False) -> None:
        self.rec = rec
        #: Keep the generated text (only when asked: it costs a list append per chunk).
        self.capture = capture_text
        if capture_text:
            rec.text = []
        self.api = api
        self.parser = SSEParser()
        self.continuous = False
        self.last_completion = 0
        self.final_completion: int | None = None
        self.done = False        # [DONE] seen
        self.finished = False    # a finish_reason seen
        self.failed = False      # a malformed or error chunk: stop reading

    def feed(self, data: bytes, now: float) -> bool:
        """Process body bytes that arrived at ``now`` (perf_counter). False: stop reading."""
        rec = self.rec
        for payload in self.parser.feed(data):
            if payload == b"[DONE]":
                self.done = True
                continue
            try:
                obj = orjson.loads(payload)
            except orjson.JSONDecodeError:
                rec.fail("malformed", f"chunk is not JSON: {payload[:120]!r}")
                self.failed = True
                return False
            try:
                facts = read_chunk(obj, self.api)
            except (AttributeError, TypeError, IndexError, KeyError) as err:  # JSON, but not a chunk's shape
                rec.fail("malformed", f"unexpected chunk ({type(err).__name__}: {err}): {payload[:120]!r}")
                self.failed = True
                return False
            if facts.error is not None:
                rec.fail("stream_error", f"error in stream: {facts.error}")
                self.failed = True
                return False
            if facts.usage_completion is not None:
                if facts.usage_prompt is not None:
                    rec.prompt_tokens = facts.usage_prompt
                if facts.final_usage:
                    self.final_completion = facts.usage_completion
                else:
                    self.continuous = True
            if facts.content:
                t = (now - rec.start_perf) * 1000.0
                if not rec.chunk_ms:
                    rec.ttft_ms = t
                rec.chunk_ms.append(t)
                if self.capture:
                    rec.text.append(chunk_text(obj, self.api))
                if "mock_sent" in obj:
                    rec.chunk_sent_ms.append((obj["mock_sent"] - rec.start_perf) * 1000.0)
                if self.continuous:
                    rec.chunk_tokens.append(max(facts.usage_completion - self.last_completion, 1))
                else:
                    rec.chunk_tokens.append(1)
            if self.continuous and facts.usage_completion is not None:
                self.last_completion = facts.usage_completion
            if facts.finished:
                self.finished = True
        return True

    def close(self, now: float) -> None:
        """The stream ended (cleanly or not): stamp e2e and settle the token counts."""
        rec = self.rec
        rec.e2e_ms = (now - rec.start_perf) * 1000.0
        if not self.failed and not (self.done or self.finished):
            rec.fail("disconnect", f"stream ended before [DONE] after {len(rec.chunk_ms)} content chunks")
        settle_tokens(rec, self.continuous, self.last_completion, self.final_completion)


def settle_tokens(rec: RequestRecord, continuous: bool, last: int, final: int | None) -> None:
    """Decide the completion token count and say where it came from.

    Continuous usage gives exact per-chunk counts. A final usage chunk gives an
    exact total; when it differs from the chunk count (several tokens per chunk),
    the total is spread evenly over the chunks. Without usage, one token per
    content chunk is the only estimate.
    """
    n = len(rec.chunk_ms)
    if continuous:
        rec.token_source = "continuous_usage"
        rec.completion_tokens = final if final is not None else last
    elif final is not None:
        rec.token_source = "usage"
        rec.completion_tokens = final
        if n and final != n and final >= n:
            base, extra = divmod(final, n)
            for i in range(n):
                rec.chunk_tokens[i] = base + (1 if i < extra else 0)
    else:
        rec.token_source = "chunks"
        rec.completion_tokens = n
