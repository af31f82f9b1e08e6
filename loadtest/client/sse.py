"""An incremental Server-Sent Events parser: bytes in, ``data`` payloads out.

We own this parser (rather than using a library's line iterator) because the
timestamp of an event must be the time its bytes were read from the socket;
a buffered iterator hands events over late and in bunches. :meth:`SSEParser.feed`
takes whatever one ``recv`` returned and gives back every event it completed,
so the caller stamps them all with that ``recv``'s time.

It follows the WHATWG event-stream rules that matter for LLM APIs: ``\\n``,
``\\r\\n`` and ``\\r`` line endings; comment lines (``:``); multi-line ``data:``
joined with ``\\n``; an optional single space after the colon; other fields
(``event``, ``id``, ``retry``) ignored; an event is dispatched at a blank line.
One limitation: a lone ``\\r`` at the very end of a read is held back until the
next byte shows whether it begins a ``\\r\\n`` pair; no LLM server ends lines
with a bare ``\\r``.
"""

from __future__ import annotations

_DATA_PREFIX = b"data:"


class SSEParser:
    """Feed raw body bytes; get the ``data`` payload of each completed event."""

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._tail + data if self._tail else data
        if b"\r" in buf:
            buf = _normalize_newlines(buf)
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._tail = buf
            return []
        self._tail = buf[end + 2 :]
        events: list[bytes] = []
        for block in buf[:end].split(b"\n\n"):
            # Fast path: one "data: ..." line, which is what every LLM server sends.
            if block.startswith(b"data: ") and b"\n" not in block:
                events.append(block[6:])
            elif block:
                payload = _parse_block(block)
                if payload is not None:
                    events.append(payload)
        return events

    @property
    def pending(self) -> bytes:
        """Bytes received that do not yet form a complete event."""
        return self._tail


def _normalize_newlines(buf: bytes) -> bytes:
    """Turn ``\\r\\n`` and ``\\r`` into ``\\n``, keeping a trailing ``\\r`` as is."""
    hold = buf.endswith(b"\r")
    if hold:
        buf = buf[:-1]
    buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return buf + b"\r" if hold else buf


def _parse_block(block: bytes) -> bytes | None:
    """The joined ``data`` of one event block, or None when it has no data field."""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, colon, value = line.partition(b":")
        if field != b"data":
            continue
        if not colon:
            value = b""
        elif value.startswith(b" "):
            value = value[1:]
        data.append(value)
    if not data:
        return None
    return b"\n".join(data)
