"""The OpenAI chat/completions wire format: request bodies out, chunk facts in.

:func:`read_chunk` decides what one SSE payload means for the measurement:
does it carry generated content (TTFT counts only such chunks, never the
role-only first chunk or an empty delta), how many tokens did the server say it
carried, is it the end. orjson parses a 200-byte chunk in about a microsecond,
so a full parse is cheaper than any byte-level shortcut is worth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Collection, Literal

import orjson

from loadtest.client.ranking import RANKING_APIS, ranking_body

Api = Literal["chat", "completions", "embeddings", "responses", "rerank", "score"]

PATHS: dict[str, str] = {
    "chat": "/chat/completions", "completions": "/completions", "embeddings": "/embeddings", "responses": "/responses",
    "rerank": "/rerank", "score": "/score",  # vLLM serves both under / and /v1; Cohere and Jina /v1/rerank
}


@dataclass(frozen=True)
class Dialect:
    """What the preflight learned the target accepts; every request body is built to it."""

    continuous_usage: bool = False
    #: Optional fields (from :data:`DROPPABLE`) the target rejected.
    drop: tuple[str, ...] = ()
    max_tokens_field: str = "max_tokens"


#: Optional request fields a server may reject, which the preflight may drop
#: (one at a time, when a 400/422 names it). ``stream_options`` drops the usage
#: chunk altogether (tokens are then counted per chunk).
DROPPABLE = ("continuous_usage_stats", "ignore_eos", "temperature", "stream_options")


def build_body(
    api: Api,
    model: str,
    prompt: str | list[dict[str, Any]],
    max_tokens: int,
    *,
    temperature: float | None = 0.0,
    ignore_eos: bool = True,
    continuous_usage: bool = False,
    extra_body: dict[str, Any] | None = None,
    max_tokens_field: str = "max_tokens",
    drop: Collection[str] = (),
    fields: dict[str, Any] | None = None,
) -> bytes:
    """A streaming request body that asks for the usage chunk (unless the server refused it).

    ``temperature=None`` leaves the field out (reasoning models reject it);
    ``max_tokens_field`` is ``max_completion_tokens`` for OpenAI's reasoning models;
    ``drop`` names optional fields (:data:`DROPPABLE`) the target is known to reject;
    ``fields`` are further body fields the workload asks for (``tools``, ``response_format``),
    which ``extra_body`` may still override.
    """
    if api in RANKING_APIS:  # not streamed: a query and its documents (ranking.py)
        return ranking_body(api, model, prompt, fields, extra_body)  # type: ignore[arg-type]
    if api == "embeddings":  # not streamed, no output length: the inputs, a batch of texts
        body = {"model": model, "input": prompt if isinstance(prompt, list) else [prompt], "encoding_format": "float"}
        body.update(fields or {})
        body.update(extra_body or {})
        return orjson.dumps(body)
    if api == "responses":  # OpenAI's Responses API: input (text or messages), max_output_tokens, no stream_options
        body = {"model": model, "input": prompt, "max_output_tokens": max_tokens, "stream": True}
        if temperature is not None and "temperature" not in drop:
            body["temperature"] = temperature
        if ignore_eos and "ignore_eos" not in drop:
            body["ignore_eos"] = True  # vLLM takes it; a server that refuses it has it dropped by the preflight
        body.update(fields or {})
        body.update(extra_body or {})
        return orjson.dumps(body)
    body: dict[str, Any] = {"model": model, max_tokens_field: max_tokens}
    if temperature is not None and "temperature" not in drop:
        body["temperature"] = temperature
    if api == "chat":
        # a whole message list (a system prompt, a conversation's history) is sent as is
        body["messages"] = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    body["stream"] = True
    if "stream_options" not in drop:
        stream_options: dict[str, Any] = {"include_usage": True}
        if continuous_usage and "continuous_usage_stats" not in drop:
            stream_options["continuous_usage_stats"] = True
        body["stream_options"] = stream_options
    if ignore_eos and "ignore_eos" not in drop:
        body["ignore_eos"] = True
    if fields:
        body.update(fields)
    if extra_body:
        body.update(extra_body)
    return orjson.dumps(body)


#: finish_reason values that mean the server gave up on the request.
_ABORTED = frozenset(("abort", "aborted", "cancelled"))


@dataclass(slots=True)
class ChunkFacts:
    """What one parsed chunk tells the recorder."""

    content: bool = False            # carries generated text (or reasoning, or a tool call)
    reasoning: bool = False          # the content is reasoning (``reasoning_content``/``reasoning``)
    finished: bool = False           # a choice has a finish_reason
    aborted: str | None = None       # the finish_reason, when it says the server aborted
    usage_completion: int | None = None  # usage.completion_tokens, when present
    usage_prompt: int | None = None
    reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens (prefix-cache hits)
    error: str | None = None         # an error object sent inside the stream


def read_chunk(obj: Any, api: Api) -> ChunkFacts:
    """Classify one decoded SSE ``data`` object.

    Raises TypeError (or AttributeError, IndexError) for JSON that is not a
    chunk's shape; the decoder records those as ``malformed``.
    """
    if not isinstance(obj, dict):
        raise TypeError("chunk is not a JSON object")
    facts = ChunkFacts()
    err = obj.get("error")
    if err:
        facts.error = str(err.get("message", err)) if isinstance(err, dict) else str(err)
        return facts
    if obj.get("object") == "error":  # vLLM's older in-stream error: {"object": "error", "message": ...}
        facts.error = str(obj.get("message") or obj)
        return facts
    choices = obj.get("choices")
    if choices:
        choice = choices[0]
        if api == "chat":
            delta = choice.get("delta") or {}
            if delta.get("content") or delta.get("tool_calls"):
                facts.content = True
            elif delta.get("reasoning_content") or delta.get("reasoning"):
                facts.content = facts.reasoning = True
        else:
            facts.content = bool(choice.get("text"))
        reason = choice.get("finish_reason")
        if reason is not None:
            facts.finished = True
            if isinstance(reason, dict):  # SGLang's internal form: {"type": "abort", "message": ...}
                reason = reason.get("type")
            if reason in _ABORTED:
                facts.aborted = str(reason)
            elif reason == "error":  # the server failed the generation (vLLM)
                facts.error = "finish_reason: error"
    usage = obj.get("usage")
    if usage:
        facts.usage_completion = usage.get("completion_tokens")
        facts.usage_prompt = _count(usage.get("prompt_tokens"))
        details = usage.get("completion_tokens_details")
        if details:
            facts.reasoning_tokens = _count(details.get("reasoning_tokens"))
        cached = usage.get("prompt_tokens_details")
        if isinstance(cached, dict):
            facts.cached_tokens = _count(cached.get("cached_tokens"))
    return facts


def chunk_text(obj: Any, api: Api) -> str:
    """The generated text a content chunk carries (the answer a conversation resends)."""
    choice = obj["choices"][0]
    if api == "chat":
        return (choice.get("delta") or {}).get("content") or ""
    return choice.get("text") or ""


def add_tool_calls(obj: Any, calls: dict[int, list[str]]) -> None:
    """Join a chat chunk's streamed ``tool_calls`` pieces into ``calls`` (index -> [name, args...]).

    OpenAI sends the id and name in a call's first delta and the arguments in
    pieces after it; vLLM the same with the name in a delta of its own; some
    servers send a whole call in one delta. Joining by ``index`` covers all three.
    """
    delta = (obj["choices"][0].get("delta") or {}) if obj.get("choices") else {}
    for i, call in enumerate(delta.get("tool_calls") or ()):
        if not isinstance(call, dict):
            continue
        index = call.get("index", i)
        entry = calls.setdefault(index if isinstance(index, int) else i, [""])
        fn = call.get("function") or {}
        if isinstance(fn.get("name"), str):
            entry[0] += fn["name"]
        if isinstance(fn.get("arguments"), str):
            entry.append(fn["arguments"])


def _count(value: Any) -> int | None:
    """A token count, or None for anything else (a count of the wrong type must not reach the records)."""
    return value if type(value) is int and value >= 0 else None


#: An HTML page's markup, and the script and style blocks whose text is no message.
_HTML_BLOCK = re.compile(rb"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_HTML_TAG = re.compile(rb"<[^>]*>")
_SPACES = re.compile(r"\s+")
#: How much of an error's text a record and a message keep.
ERROR_TEXT_CHARS = 200


def one_line(text: str, limit: int = ERROR_TEXT_CHARS) -> str:
    """``text`` on one line (its runs of whitespace one space) and at most ``limit`` characters.

    An error's text ends up in one-line messages and in the records' ``error``
    column; a server's message may hold newlines (a traceback, a pretty-printed
    body), and a proxy's error page is a whole HTML document.
    """
    flat = _SPACES.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _body_text(body: bytes) -> str:
    """The readable start of a body that is not an OpenAI-style error: an HTML page's text, not its markup."""
    head = body[:4096]
    if head.lstrip()[:1] == b"<":
        head = _HTML_TAG.sub(b" ", _HTML_BLOCK.sub(b" ", head))
    else:
        head = head[:ERROR_TEXT_CHARS * 2]
    return one_line(head.decode("utf-8", "replace"))


def error_message(body: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body's readable start: one line."""
    return one_line(_error_message(body))


def _error_message(body: bytes) -> str:
    try:
        obj = orjson.loads(body)
        err = obj.get("error") if isinstance(obj, dict) else None
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if isinstance(obj, dict) and obj.get("message"):
            return str(obj["message"])
        detail = obj.get("detail") if isinstance(obj, dict) else None
        if isinstance(detail, list) and detail:  # FastAPI's 422: [{"loc": [...], "msg": ...}, ...]
            return "; ".join(_describe_detail(d) for d in detail[:5])
        if isinstance(detail, str):
            return detail
    except (orjson.JSONDecodeError, AttributeError):
        pass
    return _body_text(body) or "(empty body)"


def _describe_detail(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    loc = ".".join(str(p) for p in item.get("loc", ()) if p != "body")
    msg = str(item.get("msg", ""))
    return f"{loc}: {msg}" if loc else msg
