"""``POST /v1/responses`` for the mock: OpenAI's Responses API event stream, from the same engine.

A request is parsed into the same :class:`~loadtest.mock.parse.CompletionRequest`
(its ``input`` is text or role/content messages; ``max_output_tokens`` is the
output length, 16 when absent) and runs through the engine like a chat request.
Only the encoding differs. The events follow OpenAI's streaming reference
(platform.openai.com/docs/api-reference/responses-streaming), each one
``event: <type>`` plus ``data: {"type": <type>, "sequence_number": n, ...}``:

- with the first token: ``response.created``, ``response.in_progress``,
  ``response.output_item.added`` (the message), ``response.content_part.added``;
- one ``response.output_text.delta`` per chunk (``" tok"`` per token);
- at the end: ``response.output_text.done``, ``response.content_part.done``,
  ``response.output_item.done`` and ``response.completed`` whose
  ``response.usage`` has ``input_tokens``, ``output_tokens`` and
  ``total_tokens``. There is no ``[DONE]``.

The stream faults (``--drop-rate``, ``--malformed-rate``, ``--stall-rate``)
hit a Responses stream as they hit a chat one, at its middle chunk.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from loadtest.mock.config import DEFAULT_MAX_TOKENS, MAX_MAX_TOKENS
from loadtest.mock.parse import BadRequest, json_body, CompletionRequest, count_words
from loadtest.mock.wire import TOKEN, http_chunk


def parse_responses(body: bytes) -> CompletionRequest:
    """Validate a Responses body into the engine's request (only what the mock needs)."""
    data = json_body(body)
    model = data["model"]
    value = data.get("input")
    if isinstance(value, str):
        words = count_words(value)
    elif isinstance(value, list) and value:
        texts: list[str] = []
        for item in value:
            content = item.get("content") if isinstance(item, dict) else None
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        words = count_words(" ".join(texts))
    else:
        raise BadRequest("Missing required parameter: 'input'.", "input")
    limit = data.get("max_output_tokens")
    if limit is None:
        limit = DEFAULT_MAX_TOKENS
    if type(limit) is not int or not 1 <= limit <= MAX_MAX_TOKENS:
        raise BadRequest(f"Invalid 'max_output_tokens': expected a positive integer, got {limit!r}.", "max_output_tokens")
    if data.get("stream") is not True:
        raise BadRequest("The mock serves /v1/responses streamed only (stream: true).", "stream")
    return CompletionRequest(chat=True, model=model, prompt_tokens=words, max_tokens=limit, stream=True,
                             include_usage=True, continuous_usage=False, responses=True)


class ResponsesEncoder:
    """Renders one Responses stream; the interface :class:`~loadtest.mock.stream.StreamSink` drives."""

    chat = True  # a first event goes out with the first token (StreamSink's role chunk)

    def __init__(self, *, request_id: str, model: str, prompt_tokens: int, max_tokens: int,
                 chunked: bool, stamp: bool, **_: Any) -> None:
        self.max_tokens = max_tokens
        self.prompt_tokens = prompt_tokens
        self.chunked = chunked
        self.stamp = stamp
        self.const_content_frame: bytes | None = None
        self._seq = 0
        self._id = "resp_" + request_id.split("-", 1)[-1]
        self._item = "msg_" + request_id.split("-", 1)[-1]
        self._model = model
        self._created = int(time.time())

    def _event(self, kind: str, now: float, **fields: Any) -> bytes:
        obj = {"type": kind, "sequence_number": self._seq, **fields}
        if self.stamp:
            obj["mock_sent"] = now
        self._seq += 1
        return b"event: %b\ndata: %b\n\n" % (kind.encode(), orjson.dumps(obj))

    def _response(self, status: str, usage: dict | None = None, text: str | None = None) -> dict[str, Any]:
        output = [] if text is None else [{
            "id": self._item, "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }]
        return {"id": self._id, "object": "response", "created_at": self._created, "status": status,
                "model": self._model, "output": output, "usage": usage}

    def role(self, now: float) -> bytes:
        part = {"type": "output_text", "text": "", "annotations": []}
        return (
            self._event("response.created", now, response=self._response("in_progress"))
            + self._event("response.in_progress", now, response=self._response("in_progress"))
            + self._event("response.output_item.added", now, output_index=0, item={
                "id": self._item, "type": "message", "status": "in_progress", "role": "assistant", "content": []})
            + self._event("response.content_part.added", now, item_id=self._item, output_index=0, content_index=0,
                          part=part)
        )

    def content(self, n_tokens: int, completion_tokens: int, now: float) -> bytes:
        return self._event("response.output_text.delta", now, item_id=self._item, output_index=0,
                           content_index=0, delta=TOKEN * n_tokens)

    def malformed(self, n_tokens: int) -> bytes:
        return b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"' \
            + TOKEN.encode() * n_tokens + b"\n\n"

    def end(self, now: float) -> bytes:
        text = TOKEN * self.max_tokens
        usage = {"input_tokens": self.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": self.max_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": self.prompt_tokens + self.max_tokens}
        return (
            self._event("response.output_text.done", now, item_id=self._item, output_index=0, content_index=0,
                        text=text)
            + self._event("response.content_part.done", now, item_id=self._item, output_index=0, content_index=0,
                          part={"type": "output_text", "text": text, "annotations": []})
            + self._event("response.output_item.done", now, output_index=0, item=self._response(
                "completed", text=text)["output"][0])
            + self._event("response.completed", now, response=self._response("completed", usage, text))
        )

    def frame(self, payload: bytes) -> bytes:
        return http_chunk(payload) if self.chunked else payload
