"""The OpenAI wire format, as bytes: SSE chunks, usage, errors, whole responses.

The mock must serve hundreds of streams at 100 chunks/s each on one core, so
a chunk must cost next to nothing. Everything that is the same for every
chunk of a request (id, model, created, the JSON around the content) is
rendered once per request by :class:`StreamEncoder`; in the common case (no
per-chunk stamp, no running usage) a full content chunk -- SSE event *and*
HTTP chunked framing -- is one pre-built ``bytes`` object, and sending a token
is one ``transport.write`` of it.

The format follows OpenAI (and vLLM where OpenAI says nothing):

- chat chunks are ``chat.completion.chunk`` objects: a first chunk whose
  delta is ``{"role": "assistant", "content": ""}``, then
  ``{"content": "..."}`` deltas, then an empty delta with
  ``finish_reason: "length"``;
- completion chunks are ``text_completion`` objects with ``choices[0].text``;
- with ``stream_options.include_usage`` every chunk carries ``"usage": null``
  and a last chunk with ``choices: []`` carries the totals;
- with ``stream_options.continuous_usage_stats`` (vLLM) every chunk carries the
  running ``usage``;
- then ``data: [DONE]``. Each event is ``data: <json>\\n\\n``.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

import orjson

#: One generated token. A short word with a leading space, so that a client
#: counting tokens (by words or with a BPE tokenizer) counts exactly one.
TOKEN = " tok"
_TOKEN_B = TOKEN.encode()

DONE_EVENT = b"data: [DONE]\n\n"

_ids = itertools.count(1)
_id_prefix = os.urandom(4).hex()


def new_request_id(chat: bool) -> str:
    """A unique id in OpenAI's style (``chatcmpl-...`` / ``cmpl-...``), cheap to make."""
    return f"{'chatcmpl' if chat else 'cmpl'}-{_id_prefix}{next(_ids):012x}"


def http_chunk(payload: bytes) -> bytes:
    """``payload`` framed as one HTTP/1.1 chunk (``Transfer-Encoding: chunked``)."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def _usage_json(prompt: int, completion: int, cached: int | None = None) -> bytes:
    """``usage``; with a prefix cache (``cached`` not None) its ``prompt_tokens_details.cached_tokens`` too."""
    details = b'' if cached is None else b',"prompt_tokens_details":{"cached_tokens":%d}' % cached
    return b'{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d%b}' % (
        prompt,
        completion,
        prompt + completion,
        details,
    )


def usage_dict(prompt: int, completion: int, cached: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


class StreamEncoder:
    """Renders the SSE events of one streamed response.

    Every method returns an *unframed* SSE payload (one or more
    ``data: ...\\n\\n`` events) except :attr:`const_content_frame`, which is a
    whole content chunk already framed for the transport (``None`` when each
    chunk differs, i.e. with stamps or running usage). ``now`` arguments are
    ``time.perf_counter()`` values for ``mock_sent``.
    """

    __slots__ = (
        "chat",
        "prompt_tokens",
        "cached_tokens",
        "max_tokens",
        "stamp",
        "include_usage",
        "continuous_usage",
        "chunked",
        "_head",
        "_usage_head",
        "_content_pre",
        "_content_post",
        "_role_body",
        "_finish_body",
        "const_content_frame",
    )

    def __init__(
        self,
        *,
        chat: bool,
        request_id: str,
        created: int,
        model: str,
        prompt_tokens: int,
        max_tokens: int,
        tokens_per_chunk: int,
        include_usage: bool,
        continuous_usage: bool,
        stamp: bool,
        chunked: bool,
        cached_tokens: int | None = None,
    ) -> None:
        self.chat = chat
        self.prompt_tokens = prompt_tokens
        #: Prompt tokens from the prefix cache (None: the mock has none, and usage says nothing).
        self.cached_tokens = cached_tokens
        self.max_tokens = max_tokens
        self.stamp = stamp
        self.include_usage = include_usage
        self.continuous_usage = continuous_usage
        self.chunked = chunked
        obj = b"chat.completion.chunk" if chat else b"text_completion"
        ident = b'{"id":%b,"object":"%b","created":%d,"model":%b,' % (
            orjson.dumps(request_id),
            obj,
            created,
            orjson.dumps(model),
        )
        self._head = b"data: " + ident + b'"choices":[{"index":0,'
        self._usage_head = b"data: " + ident + b'"choices":[]'
        if chat:
            self._content_pre = self._head + b'"delta":{"content":"'
            self._content_post = b'"},"logprobs":null,"finish_reason":null}]'
            self._role_body = (
                b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]'
            )
            self._finish_body = b'"delta":{},"logprobs":null,"finish_reason":"length"}]'
        else:
            self._content_pre = self._head + b'"text":"'
            self._content_post = b'","logprobs":null,"finish_reason":null}]'
            self._role_body = b""
            self._finish_body = b'"text":"","logprobs":null,"finish_reason":"length"}]'
        self.const_content_frame: bytes | None = None
        if not stamp and not continuous_usage:
            payload = self.content(tokens_per_chunk, 0, 0.0)
            self.const_content_frame = http_chunk(payload) if chunked else payload

    def _tail(self, completion_tokens: int, now: float) -> bytes:
        """What closes every chunk object: optional usage, optional stamp, ``}``."""
        if self.continuous_usage:
            tail = b',"usage":' + _usage_json(self.prompt_tokens, completion_tokens, self.cached_tokens)
        elif self.include_usage:
            tail = b',"usage":null'
        else:
            tail = b""
        if self.stamp:
            tail += b',"mock_sent":%r' % now
        return tail + b"}\n\n"

    def role(self, now: float) -> bytes:
        """The chat role chunk (empty for completions, which have none)."""
        if not self.chat:
            return b""
        return self._head + self._role_body + self._tail(0, now)

    def content(self, n_tokens: int, completion_tokens: int, now: float) -> bytes:
        """A content chunk carrying ``n_tokens`` tokens; ``completion_tokens`` counts them too."""
        return (
            self._content_pre
            + _TOKEN_B * n_tokens
            + self._content_post
            + self._tail(completion_tokens, now)
        )

    def malformed(self, n_tokens: int) -> bytes:
        """A content chunk cut inside its JSON string: it cannot be parsed."""
        return self._content_pre + _TOKEN_B * n_tokens + b"\n\n"

    def end(self, now: float) -> bytes:
        """The finish chunk, the usage chunk when asked for, and ``[DONE]``."""
        out = self._head + self._finish_body + self._tail(self.max_tokens, now)
        if self.include_usage:
            usage = _usage_json(self.prompt_tokens, self.max_tokens, self.cached_tokens)
            stamp = b',"mock_sent":%r' % now if self.stamp else b""
            out += self._usage_head + b',"usage":' + usage + stamp + b"}\n\n"
        return out + DONE_EVENT

    def frame(self, payload: bytes) -> bytes:
        """Frame for the transport (HTTP chunked unless the client spoke HTTP/1.0)."""
        return http_chunk(payload) if self.chunked else payload


def unary_body(
    *, chat: bool, request_id: str, model: str, prompt_tokens: int, completion_tokens: int,
    cached_tokens: int | None = None,
) -> bytes:
    """A whole non-streaming ``chat.completion`` / ``text_completion`` response."""
    text = TOKEN * completion_tokens
    choice: dict[str, Any]
    if chat:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": "length",
        }
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
    return orjson.dumps(
        {
            "id": request_id,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": usage_dict(prompt_tokens, completion_tokens, cached_tokens),
        }
    )


def error_body(
    message: str,
    *,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> bytes:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return orjson.dumps({"error": {"message": message, "type": type, "param": param, "code": code}})


def models_body(model: str, created: int, meta: dict | None = None) -> bytes:
    """``GET /v1/models``: the one model the mock claims to serve.

    ``meta`` (roofline mode) is llama.cpp's per-model metadata (``n_params``,
    ``size`` in bytes), so ``loadtest profile`` reads the model's size the same
    way from both.
    """
    entry: dict = {"id": model, "object": "model", "created": created, "owned_by": "loadtest"}
    if meta:
        entry["meta"] = meta
    return orjson.dumps({"object": "list", "data": [entry]})
