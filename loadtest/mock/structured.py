"""Tool calls and JSON-schema output for the mock: what a structured answer looks like on the wire.

A request with ``tools`` (and a ``tool_choice`` other than ``none``) gets a
streamed tool call to the first tool (or the one ``tool_choice`` names); one
with ``response_format`` ``json_schema``/``json_object`` gets a JSON document
as its content. Either way the answer is exactly ``max_tokens`` tokens, like
every mock answer, so the engine's timing model is unchanged.

The document is the smallest instance of the schema (:func:`instance`: the
first enum value, every property, one array item, ...), padded with spaces
between its tokens to one character per token at least, and cut into
``max_tokens`` pieces. ``--broken-json-rate`` cuts the document's closing
character: the stream is as fast, its JSON is broken, and a load test that
does not validate the output would score it the same.

Two chunking styles of tool calls (``--tool-call-style``):

- ``openai``: the first chunk carries the role *and* the call's header
  (``id``, ``type``, ``function.name``, ``arguments: ""``), then one
  ``{"index": 0, "function": {"arguments": "..."}}`` delta per piece;
- ``vllm``: a role-only first chunk (``content: ""``), then a delta with the
  ``id``/``type``/``name`` and no ``arguments`` key, then the argument pieces.

Both end with ``finish_reason: "tool_calls"``; JSON content ends with ``stop``.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any, Mapping

import orjson

from loadtest.mock.wire import StreamEncoder

_ids = itertools.count(1)
_prefix = os.urandom(3).hex()


@dataclass(frozen=True, slots=True)
class StructuredPlan:
    """What a request's answer must look like: a tool call (``tool`` names it) or JSON content."""

    tool: str | None
    schema: Mapping[str, Any] | None


def plan_for(data: Mapping[str, Any]) -> StructuredPlan | None:
    """The structured answer a chat body asks for (None: plain text). Lenient, as the mock is."""
    tools = data.get("tools")
    choice = data.get("tool_choice")
    if isinstance(tools, list) and tools and choice != "none":
        functions = [t.get("function") for t in tools if isinstance(t, dict) and isinstance(t.get("function"), dict)]
        if functions:
            fn = functions[0]
            if isinstance(choice, dict):
                named = (choice.get("function") or {}).get("name")
                fn = next((f for f in functions if f.get("name") == named), fn)
            params = fn.get("parameters")
            return StructuredPlan(str(fn.get("name") or "tool"), params if isinstance(params, dict) else {"type": "object"})
    fmt = data.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object"):
        inner = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
        return StructuredPlan(None, inner if isinstance(inner, dict) else {"type": "object"})
    return None


def instance(schema: Any, depth: int = 0) -> Any:
    """A small value that validates against ``schema`` (the common keywords; not every JSON Schema)."""
    if not isinstance(schema, Mapping) or depth > 8:
        return {}
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return instance(schema[key][0], depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: instance(sub, depth + 1) for name, sub in props.items()}
    if kind == "array":
        return [instance(schema.get("items") or {}, depth + 1) for _ in range(max(1, int(schema.get("minItems", 1))))]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = "tok" * max(1, int(schema.get("minLength", 1)) // 3 + 1)
    return text[: int(schema["maxLength"])] if "maxLength" in schema else text


def pieces(schema: Any, n: int, broken: bool) -> list[str]:
    """The document for ``schema`` in ``n`` pieces (padded with spaces; without its last character if ``broken``)."""
    text = orjson.dumps(instance(schema)).decode()
    need = n + (1 if broken else 0)
    if len(text) < need:  # whitespace between a JSON document's tokens is still the same document
        text = text[0] + " " * (need - len(text)) + text[1:]
    if broken:
        text = text[:-1]
    size = len(text)
    cuts = [round(i * size / n) for i in range(n + 1)]
    return [text[cuts[i] : cuts[i + 1]] for i in range(n)]


class StructuredEncoder(StreamEncoder):
    """A :class:`StreamEncoder` whose content is a tool call or a JSON document, piece by piece."""

    __slots__ = ("_plan", "_pieces", "_cursor", "_style", "_call_id")

    def __init__(self, plan: StructuredPlan, *, style: str, broken: bool, **kwargs: Any) -> None:
        self._pieces: list[str] | None = None  # StreamEncoder.__init__ must not consume a piece
        super().__init__(**kwargs)
        self.const_content_frame = None  # every chunk differs
        self._plan = plan
        self._style = style
        self._cursor = 0
        self._call_id = f"{'chatcmpl-tool' if style == 'vllm' else 'call'}-{_prefix}{next(_ids):08x}"
        n = self.max_tokens
        if plan.tool is not None:  # token 1 is the call's header (its name), the rest its arguments
            self._pieces = [""] + (pieces(plan.schema, n - 1, broken) if n > 1 else [])
            if n == 1:
                self._pieces[0] = "".join(pieces(plan.schema, 1, broken))
            reason = b"tool_calls"
        else:
            self._pieces = pieces(plan.schema, n, broken)
            reason = b"stop"
        self._finish_body = b'"delta":{},"logprobs":null,"finish_reason":"%b"}]' % reason

    def role(self, now: float) -> bytes:
        if self._plan.tool is not None and self._style == "openai":
            return b""  # OpenAI's first chunk carries the role with the call's header
        return super().role(now)

    def content(self, n_tokens: int, completion_tokens: int, now: float) -> bytes:
        if self._pieces is None:
            return b""
        start, end = self._cursor, min(self._cursor + n_tokens, len(self._pieces))
        self._cursor = end
        if self._plan.tool is None:
            delta: dict[str, Any] = {"content": "".join(self._pieces[start:end])}
        elif start == 0:
            delta = self._header("".join(self._pieces[:end]))
        else:
            delta = {"tool_calls": [{"index": 0, "function": {"arguments": "".join(self._pieces[start:end])}}]}
        return self._head + b'"delta":' + orjson.dumps(delta) + b',"logprobs":null,"finish_reason":null}]' + self._tail(
            completion_tokens, now
        )

    def _header(self, arguments: str) -> dict[str, Any]:
        fn: dict[str, Any] = {"name": self._plan.tool}
        call: dict[str, Any] = {"index": 0, "id": self._call_id, "type": "function", "function": fn}
        if self._style == "vllm":
            if arguments:
                fn["arguments"] = arguments
            return {"tool_calls": [call]}
        fn["arguments"] = arguments
        return {"role": "assistant", "content": None, "tool_calls": [call], "refusal": None}
