"""An incremental Server-Sent Events parser: bytes in, ``data`` payloads out.

We own this parser (rather than using a library's line iterator) because the
timestamp of an event must be the time its bytes were read from the socket;
a buffered iterator hands events over late and in bunches. :meth:`SSEParser.feed`
takes whatever one ``recv`` returned and gives back every event it completed,
so the caller stamps them all with that ``recv``'s time.

It follows the WHATWG event-stream rules that matter for LLM APIs: ``\\n``,
``\\r\\n`` and ``\\r`` line endings; comment lines (``:``); multi-line ``data:``
joined with ``\\n``; an optional single space after the colon; ``id`` and
``retry`` ignored; an event is dispatched at a blank line. Two departures, both
for real servers:

- An event with an ``event:`` name other than ``message`` (TGI's
  ``event: error``) is returned as an :class:`SSEEvent`, so the caller can tell
  an error event from a chunk; plain events stay ``bytes`` (the hot path).
- :meth:`SSEParser.finish` (at the end of the body) dispatches a last event
  whose closing blank line never came (``data: [DONE]\\n`` and then a close),
  which WHATWG would drop; a half-received last line is still dropped.

Bytes that do not complete an event are kept as a list of pieces and only
joined once the event's blank line arrives, and each read is searched only
where an event end can be (the new bytes and the one before them), so a very
long event that arrives in many reads costs linear time, not quadratic.
A lone ``\\r`` at the end of a read is held back until the next byte shows
whether it begins a ``\\r\\n`` pair.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """An event with an explicit, non-default ``event:`` name (e.g. ``error``)."""

    name: str
    data: bytes


class SSEParser:
    """Feed raw body bytes; get the ``data`` payload of each completed event."""

    __slots__ = ("_pieces", "_last", "_cr")

    def __init__(self) -> None:
        self._pieces: list[bytes] = []  # normalized bytes of the event(s) not yet complete
        self._last = 0                  # the last byte of those pieces (0 when none)
        self._cr = False                # a trailing "\r" held back from the previous read

    def feed(self, data: bytes) -> list[bytes | SSEEvent]:
        if data[-2:] == b"\n\n" and not self._pieces and not self._cr and b"\r" not in data:
            # The usual read: whole events and nothing carried over (what the general path
            # below would find too, without its copies and its look-behind).
            return _split_events(data[:-2])
        if self._cr:
            data = b"\r" + data
            self._cr = False
        if b"\r" in data:
            if data.endswith(b"\r"):
                data = data[:-1]
                self._cr = True
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if not data:
            return []
        if self._pieces:
            # Only the new bytes (and the junction with the old ones) can hold an event's end.
            if b"\n\n" not in data and not (self._last == 10 and data[0] == 10):
                self._pieces.append(data)
                self._last = data[-1]
                return []
            buf = b"".join(self._pieces) + data
            self._pieces = []
        else:
            buf = data
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._pieces = [buf]
            self._last = buf[-1]
            return []
        rest = buf[end + 2 :]
        if rest:
            self._pieces = [rest]
            self._last = rest[-1]
        else:
            self._last = 0
        return _split_events(buf[:end])

    def finish(self) -> list[bytes | SSEEvent]:
        """The body ended: dispatch a last event that lacks only its blank line."""
        pending = b"".join(self._pieces) + (b"\n" if self._cr else b"")
        self._pieces, self._last, self._cr = [], 0, False
        if not pending.endswith(b"\n"):
            # The last line itself is incomplete: only a bare [DONE] is unambiguous.
            if pending.strip() in (b"data: [DONE]", b"data:[DONE]"):
                return [b"[DONE]"]
            pending = pending[: pending.rfind(b"\n") + 1]
        return _split_events(pending.rstrip(b"\n"))

    @property
    def has_partial(self) -> bool:
        """Some bytes received do not yet form a complete event (cheaper than ``pending``)."""
        return bool(self._pieces) or self._cr

    @property
    def pending(self) -> bytes:
        """Bytes received that do not yet form a complete event."""
        return b"".join(self._pieces) + (b"\r" if self._cr else b"")


def _split_events(text: bytes) -> list[bytes | SSEEvent]:
    events: list[bytes | SSEEvent] = []
    if not text:
        return events
    # Fast path, in C: every event is one "data: ..." line, which is what every LLM
    # server sends. Splitting at each blank line followed by "data: " gives the
    # payloads; it is exact when the text holds no other newline than those blank lines.
    parts = (b"\n\n" + text).split(b"\n\ndata: ")
    if not parts[0] and text.count(b"\n") == 2 * (len(parts) - 2):
        del parts[0]
        return parts
    for block in text.split(b"\n\n"):
        # Fast path: one "data: ..." line, which is what every LLM server sends.
        if block.startswith(b"data: ") and b"\n" not in block:
            events.append(block[6:])
        elif block:
            payload = _parse_block(block)
            if payload is not None:
                events.append(payload)
    return events


def _parse_block(block: bytes) -> bytes | SSEEvent | None:
    """The joined ``data`` of one event block (an :class:`SSEEvent` when named), or None."""
    data: list[bytes] = []
    name = b""
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if field == b"event":
            name = value
            continue
        if field != b"data":
            continue
        data.append(value if colon else b"")
    if not data and name in (b"", b"message"):
        return None
    payload = b"\n".join(data)
    if name and name != b"message":
        return SSEEvent(name.decode("utf-8", "replace"), payload)
    return payload
