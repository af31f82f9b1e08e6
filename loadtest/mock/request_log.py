"""``loadtest mock --request-log FILE``: the server's own account of every request.

One JSON line per streamed request, written when it ends: when it arrived, when
its first token was written, when it ended and how (all ``time.perf_counter()``
seconds, the client's clock on the same host), and the prompt it was sent. It is
the ground truth the tests hold the client's records against: TTFT as the
server saw it, what prompts arrived, in which order. Off by default, since a
write per request costs the engine time at high rates.
"""

from __future__ import annotations

import time
from typing import IO, Any, Callable, TypeVar

import orjson

from loadtest.errors import InputError

_Log = TypeVar("_Log")


def open_log(flag: str, opener: Callable[[str], _Log], path: str | None) -> _Log | None:
    """Open a log file an option names (None: not asked for), or one line naming the option.

    Opened at start-up, before the mock listens: a directory or an unwritable path is a mistake in
    the command line, said as ``--request-log runs/: is a directory`` (exit 2), not as a bare path.
    """
    if not path:
        return None
    try:
        return opener(path)
    except OSError as err:
        raise InputError(f"{flag} {path}: {(err.strerror or str(err)).lower()}") from None


def prompt_text(body: bytes, *, chat: bool) -> str:
    """The prompt of a request body: the messages' text contents joined by newlines, or ``prompt``."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    if chat:
        parts = []
        for message in data.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        return "\n".join(parts)
    prompt = data.get("prompt")
    return prompt if isinstance(prompt, str) else orjson.dumps(prompt).decode()


class TimedSink:
    """Wraps a stream sink to note when the first token went out."""

    __slots__ = ("inner", "first_token")

    def __init__(self, inner: Callable[[int], bool]) -> None:
        self.inner = inner
        self.first_token: float | None = None

    def __call__(self, generated: int) -> bool:
        if generated >= 1 and self.first_token is None:
            self.first_token = time.perf_counter()
        return self.inner(generated)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class RequestLog:
    """Appends one JSON line per request to an open file."""

    def __init__(self, path: str) -> None:
        self._file: IO[bytes] = open(path, "ab", buffering=0)

    def write(self, arrival: float, sink: TimedSink, outcome: str, prompt: str, model: str | None = None,
              path: str | None = None) -> None:
        end = time.perf_counter()
        first = sink.first_token
        line = {
            "arrival": arrival,
            "first_token": first,
            "end": end,
            "ttft_ms": (first - arrival) * 1000.0 if first is not None else None,
            "outcome": outcome,
            "prompt": prompt,
            "model": model,  # the body's model: a class's override (a LoRA adapter) reaches the server
            # the request target as received, query included: a base URL's ?api-version=… must come after the path
            "path": path,
            # the wall clock of these stamps as of this line: a reader converting them to wall time
            # later would be off by any step of the wall clock in between (a VM's clock is stepped)
            "wall_offset": time.time() - end,
        }
        self._file.write(orjson.dumps(line) + b"\n")

    def close(self) -> None:
        self._file.close()
