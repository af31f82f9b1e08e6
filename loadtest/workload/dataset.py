"""Prompts from a file: JSON lines or ShareGPT, read as a stream.

Formats (``workload.dataset.format``):

* ``jsonl``: one JSON object per line, ``{"prompt": "..."}`` or
  ``{"messages": [{"role": ..., "content": ...}, ...]}``, with an optional
  ``"max_tokens"`` (a positive integer), and optional ``"images"`` (a path, relative to the
  dataset file, or an http(s) URL, or a list of them: see :mod:`image_sources`). Blank lines
  are skipped.
* ``sharegpt``: ShareGPT's JSON, an array of
  ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}``
  (a file with one such object per line is read too). The first human turn is
  the prompt; the first answer after it gives the output length. A
  conversation that has no human turn is skipped, as benchmark tools do. LLaVA's ``"image"``
  (or ``"images"``) names the row's images, as in jsonl.

The file is read once, as a stream: one JSON item is parsed at a time and only
what a request needs is kept (the prompt text, or the message list, and an
output length), so a 1 GB ShareGPT dump is never held twice in memory. The
SHA-256 of the bytes is computed on the same pass: it goes into run.json so
two runs can tell whether they used the same data.

Every problem is one :class:`~loadtest.errors.InputError` line naming the
file and, for a bad row, its line number.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from loadtest.errors import InputError
from loadtest.scenario import Dataset as DatasetSpec
from loadtest.workload.image_sources import row_images
from loadtest.workload.words import count_words

_READ_SIZE = 1 << 20


@dataclass(frozen=True, slots=True)
class Entry:
    """One dataset row: a prompt (or a message list) and, maybe, an output length."""

    prompt: str
    #: The row's own messages (jsonl ``messages``), sent as they are in single-request use.
    messages: tuple[tuple[str, str], ...] | None = None
    #: The row's ``max_tokens``, or the length (in words) of ShareGPT's answer.
    output_tokens: int | None = None
    #: The row's images: resolved file paths, http(s) URLs or data URIs (chat only; image_sources.py).
    images: tuple[str, ...] | None = None


@dataclass
class Dataset:
    """A loaded dataset: its entries and where they came from."""

    path: str
    format: str
    entries: list[Entry]
    sha256: str
    skipped: int = 0
    #: Rows that name images (only target.api chat can send them).
    with_images: int = 0

    def fingerprint(self) -> dict[str, Any]:
        """What run.json records, so runs on different data are never compared blindly."""
        return {
            "path": self.path,
            "format": self.format,
            "sha256": self.sha256,
            "rows": len(self.entries),
            "skipped": self.skipped,
        }


_LOADED: dict[tuple[str, str], Dataset] = {}
_LOCK = threading.RLock()


def load_dataset(spec: DatasetSpec) -> Dataset:
    """Read a dataset once per process (later calls return the same object)."""
    key = (spec.path, spec.format)
    with _LOCK:
        if key not in _LOADED:
            _LOADED[key] = _read(spec.path, spec.format)
        return _LOADED[key]


def _read(path: str, fmt: str) -> Dataset:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such dataset file")
    digest = hashlib.sha256()
    entries: list[Entry] = []
    skipped = 0
    try:
        with open(p, "rb") as fh:
            chunks = _hashed(fh, digest)
            rows = _jsonl_rows(chunks) if fmt == "jsonl" else _sharegpt_rows(chunks, path)
            for line, obj in rows:
                entry = _jsonl_entry(obj, path, line) if fmt == "jsonl" else _sharegpt_entry(obj, path, line)
                if entry is None:
                    skipped += 1
                else:
                    entries.append(entry)
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    if not entries:
        if skipped:
            raise InputError(f"{path}: no usable prompt ({skipped} conversations, none with a human turn)")
        raise InputError(f"{path}: the dataset is empty (no {fmt} rows)")
    return Dataset(path=path, format=fmt, entries=entries, sha256=digest.hexdigest(), skipped=skipped,
                   with_images=sum(1 for e in entries if e.images))


def _hashed(fh: Any, digest: Any) -> Iterator[bytes]:
    while True:
        chunk = fh.read(_READ_SIZE)
        if not chunk:
            return
        digest.update(chunk)
        yield chunk


# -- jsonl ------------------------------------------------------------------------------------


def _lines(chunks: Iterator[bytes]) -> Iterator[tuple[int, bytes]]:
    """(line number, line) from a stream of byte chunks."""
    rest = b""
    number = 0
    for chunk in chunks:
        rest += chunk
        *lines, rest = rest.split(b"\n")
        for line in lines:
            number += 1
            yield number, line
    if rest:
        yield number + 1, rest


def _jsonl_rows(chunks: Iterator[bytes]) -> Iterator[tuple[int, Any]]:
    for number, line in _lines(chunks):
        if not line.strip():
            continue
        try:
            yield number, orjson.loads(line)
        except orjson.JSONDecodeError as err:
            yield number, _BadJson(str(err))


@dataclass
class _BadJson:
    message: str


def _where(path: str, line: int) -> str:
    return f"{path}: line {line}"


def _jsonl_entry(obj: Any, path: str, line: int) -> Entry:
    if isinstance(obj, _BadJson):
        raise InputError(f"{_where(path, line)}: not valid JSON ({obj.message})")
    if not isinstance(obj, dict):
        raise InputError(f"{_where(path, line)}: expected a JSON object like {{\"prompt\": \"...\"}}")
    max_tokens = _max_tokens(obj.get("max_tokens"), path, line)
    images = row_images(obj.get("images"), path, line)
    if "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise InputError(f"{_where(path, line)}: 'prompt' must be a non-empty string")
        return Entry(prompt=prompt, output_tokens=max_tokens, images=images)
    if "messages" in obj:
        messages = _messages(obj["messages"], path, line)
        users = [content for role, content in messages if role == "user"]
        if not users:
            raise InputError(f"{_where(path, line)}: 'messages' has no message with role 'user'")
        return Entry(prompt=users[-1], messages=messages, output_tokens=max_tokens, images=images)
    raise InputError(f"{_where(path, line)}: needs 'prompt' (a string) or 'messages' (a list of {{role, content}})")


def _messages(value: Any, path: str, line: int) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not value:
        raise InputError(f"{_where(path, line)}: 'messages' must be a non-empty list of {{role, content}}")
    out = []
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) or not isinstance(message.get("content"), str):
            raise InputError(f"{_where(path, line)}: messages[{i}] must be {{\"role\": str, \"content\": str}}")
        out.append((message["role"], message["content"]))
    return tuple(out)


def _max_tokens(value: Any, path: str, line: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{_where(path, line)}: 'max_tokens' must be a positive integer, got {value!r}")
    return value


# -- ShareGPT -----------------------------------------------------------------------------------


def _sharegpt_rows(chunks: Iterator[bytes], path: str) -> Iterator[tuple[int, Any]]:
    """Items of ShareGPT's top-level JSON array, one at a time, with the line each starts on.

    ``json.JSONDecoder.raw_decode`` parses one item from a text buffer that is
    refilled as it drains, so memory holds one read block plus one item. A
    file whose first character is not ``[`` is read as JSON lines instead.
    """
    decoder = json.JSONDecoder()
    text_chunks = _decoded(chunks, path)
    buf = ""
    pos = 0
    line = 1
    eof = False

    def fill() -> bool:
        nonlocal buf, pos, eof
        if eof:
            return False
        try:
            more = next(text_chunks)
        except StopIteration:
            eof = True
            return False
        buf = buf[pos:] + more
        pos = 0
        return True

    def skip(chars: str) -> None:
        nonlocal pos, line
        while True:
            while pos < len(buf) and buf[pos] in chars:
                if buf[pos] == "\n":
                    line += 1
                pos += 1
            if pos < len(buf) or not fill():
                return

    skip(" \t\r\n\ufeff")
    if pos >= len(buf):
        return
    if buf[pos] != "[":
        # one conversation object per line
        rest = buf[pos:]
        yield from _jsonl_rows(_encoded(rest, text_chunks))
        return
    pos += 1
    while True:
        skip(" \t\r\n,")
        if pos >= len(buf):
            raise InputError(f"{_where(path, line)}: the JSON array is not closed (file truncated?)")
        if buf[pos] == "]":
            return
        while True:
            try:
                obj, end = decoder.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as err:
                if not fill():
                    at = line + err.lineno - 1 - buf.count("\n", 0, pos)
                    raise InputError(f"{_where(path, at)}: not valid JSON ({err.msg})") from None
        start_line = line
        line += buf.count("\n", pos, end)
        pos = end
        yield start_line, obj


def _decoded(chunks: Iterator[bytes], path: str) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for chunk in chunks:
            yield decoder.decode(chunk)
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text ({err.reason})") from None


def _encoded(first: str, rest: Iterator[str]) -> Iterator[bytes]:
    yield first.encode()
    for text in rest:
        yield text.encode()


def _sharegpt_entry(obj: Any, path: str, line: int) -> Entry | None:
    if isinstance(obj, _BadJson):
        raise InputError(f"{_where(path, line)}: not valid JSON ({obj.message})")
    if not isinstance(obj, dict) or not isinstance(obj.get("conversations"), list):
        raise InputError(f"{_where(path, line)}: expected {{\"conversations\": [{{\"from\": ..., \"value\": ...}}, ...]}}")
    turns = obj["conversations"]
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise InputError(f"{_where(path, line)}: conversations[{i}] must be {{\"from\": str, \"value\": str}}")
    human = next((i for i, t in enumerate(turns) if t.get("from") in ("human", "user") and t["value"].strip()), None)
    if human is None:
        return None
    answer = next((t["value"] for t in turns[human + 1 :] if t.get("from") in ("gpt", "assistant", "chatgpt", "bard")), None)
    output = count_words(answer) if answer else None
    images = row_images(obj.get("image", obj.get("images")), path, line)  # LLaVA's "image"
    return Entry(prompt=turns[human]["value"], output_tokens=output or None, images=images)


# -- order ------------------------------------------------------------------------------------


@dataclass
class Cursor:
    """Hands out a dataset's entries in file order or in a seeded shuffle, shared by a process's users.

    Shared, so that the users of one process walk the dataset together: with
    ``sequential`` the server sees the rows in file order (one user), and with
    ``shuffle`` every row is used once before any repeats. A shuffle is
    reshuffled at each pass, from the same seed.
    """

    dataset: Dataset
    order: str
    seed: str
    _position: int = 0
    _order: list[int] = field(default_factory=list)
    _rng: random.Random | None = None

    def next(self) -> Entry:
        n = len(self.dataset.entries)
        i = self._position % n
        if self.order == "shuffle":
            if i == 0:
                self._rng = self._rng or random.Random(self.seed)
                self._order = list(range(n))
                self._rng.shuffle(self._order)
            index = self._order[i]
        else:
            index = i
        self._position += 1
        return self.dataset.entries[index]


_CURSORS: dict[tuple[str, str, str], Cursor] = {}


def cursor_for(spec: DatasetSpec, seed: str) -> Cursor:
    """The process's shared cursor over ``spec`` (greenlets share it; they switch only on I/O)."""
    key = (spec.path, spec.format, spec.order)
    with _LOCK:
        if key not in _CURSORS:
            _CURSORS[key] = Cursor(load_dataset(spec), spec.order, seed)
        return _CURSORS[key]
