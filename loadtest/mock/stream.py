"""Sinks: what happens on the socket when the engine hands a request a token.

A sink is called synchronously by the engine at the end of each step (see
:data:`loadtest.mock.engine.Sink`). :class:`StreamSink` turns token counts into
SSE chunks of ``tokens_per_chunk`` tokens and writes them *directly* to the
connection's transport, after aiohttp has sent the response head: no task
wake-up, no ``await drain()`` per token. That is what lets one core serve
hundreds of streams. (Back-pressure is ignored on purpose: a chunk is tens of
bytes, and a client that stops reading is one the test should see as slow.)

It is also where the stream faults happen, at the middle chunk of the stream
(:func:`loadtest.mock.faults.middle_chunk`): *drop* closes the connection
before that chunk, without the final chunk or ``[DONE]``; *malformed* sends
that chunk cut inside its JSON.
"""

from __future__ import annotations

import asyncio
import time

from loadtest.mock.wire import StreamEncoder

_perf = time.perf_counter


class StreamSink:
    """Writes one SSE response as the engine generates its tokens."""

    __slots__ = (
        "_transport",
        "_enc",
        "_k",
        "_max",
        "_sent",
        "_chunk",
        "_drop_chunk",
        "_malformed_chunk",
        "_const",
        "dropped",
        "malformed_sent",
    )

    def __init__(
        self,
        transport: asyncio.Transport,
        encoder: StreamEncoder,
        *,
        tokens_per_chunk: int,
        drop_chunk: int = -1,
        malformed_chunk: int = -1,
    ) -> None:
        self._transport = transport
        self._enc = encoder
        self._k = tokens_per_chunk
        self._max = encoder.max_tokens
        self._sent = 0  # tokens sent so far
        self._chunk = 0  # index of the next content chunk
        self._drop_chunk = drop_chunk
        self._malformed_chunk = malformed_chunk
        self._const = encoder.const_content_frame
        #: True once an injected drop cut the connection.
        self.dropped = False
        #: True once the injected malformed chunk was written (the client may leave after it).
        self.malformed_sent = False

    def __call__(self, generated: int) -> bool:
        transport = self._transport
        if transport.is_closing():
            return False  # the client went away: free the slot
        if generated == 0:
            return True  # admission check only
        n = generated - self._sent
        last = generated >= self._max
        if n < self._k and not last:
            if generated == 1 and self._enc.chat:
                # The role chunk goes out with the first token, as vLLM does,
                # even when that token waits for the rest of its chunk.
                self._write_role()
            return True
        chunk = self._chunk
        if chunk == self._drop_chunk:
            return self._drop(generated)
        self._chunk = chunk + 1
        self._sent = generated
        if (
            self._const is not None
            and n == self._k
            and not last
            and generated != 1
            and chunk != self._malformed_chunk
        ):
            transport.write(self._const)  # the hot path: one pre-built frame
            return True
        return self._write_slow(generated, n, last, chunk)

    def _write_slow(self, generated: int, n: int, last: bool, chunk: int) -> bool:
        enc = self._enc
        now = _perf()
        payload = enc.role(now) if generated == 1 else b""
        if chunk == self._malformed_chunk:
            payload += enc.malformed(n)
            self.malformed_sent = True
        else:
            payload += enc.content(n, generated, now)
        if last:
            payload += enc.end(now)
        self._transport.write(enc.frame(payload))
        return True

    def _write_role(self) -> None:
        role = self._enc.role(_perf())
        if role:  # an OpenAI-style tool call has none of its own (an empty HTTP chunk would end the body)
            self._transport.write(self._enc.frame(role))

    def _drop(self, generated: int) -> bool:
        if generated == 1 and self._enc.chat:  # the role chunk was not sent yet
            self._write_role()
        self.dropped = True
        self._transport.close()  # flushes what was sent, then FIN: no [DONE]
        return False


class AliveSink:
    """The sink of a non-streaming request: nothing to send until the end.

    It only reports whether the client is still there, so that a client that
    gives up frees its slot; an injected drop stops the request at
    ``drop_at`` tokens.
    """

    __slots__ = ("_transport", "_drop_at", "dropped")

    def __init__(self, transport: asyncio.Transport, *, drop_at: int = -1) -> None:
        self._transport = transport
        self._drop_at = drop_at
        self.dropped = False

    def __call__(self, generated: int) -> bool:
        if self._transport.is_closing():
            return False
        if generated == self._drop_at:
            self.dropped = True
            return False
        return True
