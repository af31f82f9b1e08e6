"""The OpenAI chat/completions wire format: request bodies out, chunk facts in.

:func:`read_chunk` decides what one SSE payload means for the measurement:
does it carry generated content (TTFT counts only such chunks, never the
role-only first chunk or an empty delta), how many tokens did the server say it
carried, is it the end. orjson parses a 200-byte chunk in about a microsecond,
so a full parse is cheaper than any byte-level shortcut is worth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

Api = Literal["chat", "completions"]

PATHS: dict[str, str] = {"chat": "/chat/completions", "completions": "/completions"}


def build_body(
    api: Api,
    model: str,
    prompt: str | list[dict[str, Any]],
    max_tokens: int,
    *,
    temperature: float = 0.0,
    ignore_eos: bool = True,
    continuous_usage: bool = False,
    extra_body: dict[str, Any] | None = None,
) -> bytes:
    """A streaming request body that always asks for the usage chunk.

    ``prompt`` is the user's text, or (chat) a whole message list: a system
    prompt, a conversation's history.
    """
    stream_options: dict[str, Any] = {"include_usage": True}
    if continuous_usage:
        stream_options["continuous_usage_stats"] = True
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": temperature}
    if api == "chat":
        body["messages"] = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    body["stream"] = True
    body["stream_options"] = stream_options
    if ignore_eos:
        body["ignore_eos"] = True
    if extra_body:
        body.update(extra_body)
    return orjson.dumps(body)


@dataclass(slots=True)
class ChunkFacts:
    """What one parsed chunk tells the recorder."""

    content: bool = False            # carries generated text (or reasoning, or a tool call)
    finished: bool = False           # a choice has a finish_reason
    usage_completion: int | None = None  # usage.completion_tokens, when present
    usage_prompt: int | None = None
    final_usage: bool = False        # the usage-only chunk (choices == [])
    error: str | None = None         # an error object sent inside the stream


def read_chunk(obj: Any, api: Api) -> ChunkFacts:
    """Classify one decoded SSE ``data`` object.

    Raises TypeError (or AttributeError, IndexError) for JSON that is not a
    chunk's shape; the decoder records those as ``malformed``.
    """
    if not isinstance(obj, dict):
        raise TypeError("chunk is not a JSON object")
    facts = ChunkFacts()
    if "error" in obj and obj["error"]:
        err = obj["error"]
        facts.error = str(err.get("message", err)) if isinstance(err, dict) else str(err)
        return facts
    choices = obj.get("choices")
    if choices:
        choice = choices[0]
        if api == "chat":
            delta = choice.get("delta") or {}
            facts.content = bool(
                delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or delta.get("tool_calls")
            )
        else:
            facts.content = bool(choice.get("text"))
        facts.finished = choice.get("finish_reason") is not None
    usage = obj.get("usage")
    if usage:
        facts.usage_completion = usage.get("completion_tokens")
        facts.usage_prompt = usage.get("prompt_tokens")
        facts.final_usage = not choices
    return facts


def chunk_text(obj: Any, api: Api) -> str:
    """The generated text a content chunk carries (the answer a conversation resends)."""
    choice = obj["choices"][0]
    if api == "chat":
        return (choice.get("delta") or {}).get("content") or ""
    return choice.get("text") or ""


def error_message(body: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body's start."""
    try:
        obj = orjson.loads(body)
        err = obj.get("error") if isinstance(obj, dict) else None
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if isinstance(obj, dict) and obj.get("message"):
            return str(obj["message"])
    except (orjson.JSONDecodeError, AttributeError):
        pass
    text = body[:200].decode("utf-8", "replace").strip()
    return text or "(empty body)"
