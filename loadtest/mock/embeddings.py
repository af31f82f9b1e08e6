"""``POST /v1/embeddings`` for the mock: a batch of inputs in, one vector per input out.

The cost is the engine's own (MODEL.md): an embeddings request is a sequence
of one step, admitted like any other, whose prefill is ``P`` per input token
(all its inputs' words together). So a step that admits ``k`` of them lasts
``B + k × (S + P × L)`` with ``L`` each request's tokens, and with ``c``
closed-loop users the e2e latency is about ``c × (P × L + S) + 2 × B`` once the
engine is busy (every user waits for the step that admits the others' batches
and then its own). vLLM's pooling
runner works the same way: prefill only, batched by its scheduler.

Vectors are ``--embedding-dim`` floats derived from the input's position, so a
body is cheap to build and its size grows with the batch as a real one does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import orjson
from aiohttp import web

from loadtest.mock.engine import Outcome, Sequence
from loadtest.mock.metrics import CLIENT_CLOSED
from loadtest.mock.stream import AliveSink
from loadtest.mock.parse import BadRequest, json_body, count_words


@dataclass(frozen=True, slots=True)
class EmbeddingsRequest:
    model: str
    inputs: int
    prompt_tokens: int


def parse_embeddings(body: bytes) -> EmbeddingsRequest:
    """Validate an embeddings body (OpenAI's shapes: a string, strings, token ids, lists of them)."""
    data = json_body(body)
    model = data["model"]
    value = data.get("input")
    if isinstance(value, str) or (isinstance(value, list) and value and all(type(t) is int for t in value)):
        value = [value]
    if not isinstance(value, list) or not value:
        raise BadRequest("Invalid 'input': expected a string, an array of strings or of token arrays.", "input")
    tokens = 0
    for i, item in enumerate(value):
        if isinstance(item, str) and item:
            tokens += max(1, count_words(item))
        elif isinstance(item, list) and item and all(type(t) is int for t in item):
            tokens += len(item)
        else:
            raise BadRequest(f"Invalid 'input[{i}]': expected a non-empty string or token array.", f"input[{i}]")
    return EmbeddingsRequest(model=model, inputs=len(value), prompt_tokens=tokens)


def embeddings_body(req: EmbeddingsRequest, dim: int) -> bytes:
    """OpenAI's ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}], usage}``."""
    data: list[dict[str, Any]] = [
        {"object": "embedding", "index": i, "embedding": [round(((i * 31 + j * 7) % 97) / 97.0 - 0.5, 6) for j in range(dim)]}
        for i in range(req.inputs)
    ]
    return orjson.dumps({
        "object": "list",
        "data": data,
        "model": req.model,
        "usage": {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens},
        "created": int(time.time()),
    })


async def serve_embeddings(
    service: Any, request: Any, error_response: Any, outcome_key: str,
    parse: Callable[[bytes], Any] = parse_embeddings, render: Callable[[Any], bytes] | None = None,
) -> Any:
    """The route's work for :class:`~loadtest.mock.server.MockService`: auth, body, the fail fault, one step.

    Sets ``request[outcome_key]`` as the chat routes do (the service counts it once);
    ``error_response`` is the server's OpenAI-style error builder (passed in: no import circle).
    Rerank and score are served the same way (:mod:`ranking`): their ``parse`` and ``render``
    (a parsed request with ``prompt_tokens`` in, the answer's bytes out).
    """

    if (denied := service._check_auth(request)) is not None:
        request[outcome_key] = "http_4xx"
        return denied
    try:
        req = parse(await request.read())
    except BadRequest as err:
        request[outcome_key] = "http_4xx"
        return error_response(400, err.message, param=err.param)
    if service.faults.draw().fail:
        service.metrics.faults["fail"] += 1
        request[outcome_key] = "http_500"
        return error_response(500, "Injected failure (--fail-rate).", type="server_error", code="mock_failure")
    transport = request.transport
    if transport is None or transport.is_closing():
        return web.Response(status=CLIENT_CLOSED)
    seq = Sequence(req.prompt_tokens, 1, AliveSink(transport))
    service.engine.submit(seq)
    outcome = await seq.done
    if outcome is Outcome.SHUTDOWN:
        request[outcome_key] = "shutdown"
        return error_response(503, "The mock is shutting down.", type="server_error")
    if outcome is Outcome.ABORTED:
        return web.Response(status=CLIENT_CLOSED)
    request[outcome_key] = "ok"
    body = render(req) if render is not None else embeddings_body(req, service.config.embedding_dim)
    return web.Response(body=body, content_type="application/json")
