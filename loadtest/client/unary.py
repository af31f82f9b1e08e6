"""Requests that are not streamed: embeddings, rerank and score. One JSON body in, one record out.

An embeddings request has no first token and no chunks: its latency is the
whole exchange (``e2e_ms``, stamped when the last body byte was read), its
size is the number of inputs (``items``) and the prompt tokens the server
counted (``usage.prompt_tokens``). The same accounting rules as for streams
hold: a 200 whose body is not an embeddings list, or holds fewer vectors than
inputs sent, is ``malformed``, never a success; the inputs' count comes from
the body sent, so a server that drops inputs cannot look faster per item.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from loadtest.client.ranking import RANKING_APIS, read_ranking
from loadtest.client.record import RequestRecord

#: Request kinds answered with one JSON body instead of an event stream (rerank, score: ranking.py).
UNARY_APIS = frozenset({"embeddings"}) | RANKING_APIS


def inputs_sent(body: bytes) -> int:
    """How many inputs an embeddings body carries (a string or token-id list is one)."""
    try:
        value = orjson.loads(body).get("input")
    except (orjson.JSONDecodeError, AttributeError):
        return 0
    if isinstance(value, list) and value and not all(type(v) is int for v in value):
        return len(value)
    return 1 if value else 0


def read_embeddings(rec: RequestRecord, payload: bytes, expected: int) -> None:
    """Fill ``rec`` from an embeddings response body (read whole; the caller stamped the end)."""
    try:
        obj: Any = orjson.loads(payload)
    except orjson.JSONDecodeError:
        rec.fail("malformed", f"embeddings body is not JSON: {payload[:120]!r}")
        return
    data = obj.get("data") if isinstance(obj, dict) else None
    if isinstance(obj, dict) and obj.get("error"):
        err = obj["error"]
        rec.fail("stream_error", f"error in body: {err.get('message', err) if isinstance(err, dict) else err}")
        return
    if not isinstance(data, list):
        rec.fail("malformed", f"embeddings body has no 'data' list: {payload[:120]!r}")
        return
    vectors = sum(1 for d in data if isinstance(d, dict) and isinstance(d.get("embedding"), (list, str)))
    rec.items = expected or vectors
    if vectors < expected:
        rec.fail("malformed", f"{vectors} embeddings for {expected} inputs")
        return
    usage = obj.get("usage")
    prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if type(prompt) is int and prompt >= 0:
        rec.prompt_tokens = prompt
        rec.token_source = "usage"
    rec.completion_tokens = 0


def send_unary(rec: RequestRecord, response: Any, body: bytes, max_body: int, api: str) -> None:
    """Read a 200's whole JSON body and record it; e2e is when its last byte arrived.

    ``api`` is the client's kind (embeddings, rerank, score); ``body`` the bytes sent, read back
    for how many inputs were asked, so a server that answers fewer cannot look faster per item.
    """
    if "json" not in (response.get("content-type") or ""):
        rec.fail("malformed", f"the answer is not JSON: Content-Type is {response.get('content-type')!r}")
        return
    payload = response.read(max_body)
    rec.e2e_ms = (time.perf_counter() - rec.start_perf) * 1000.0
    if api not in RANKING_APIS:
        read_embeddings(rec, payload, inputs_sent(body))
        return
    try:
        sent = orjson.loads(body)
    except orjson.JSONDecodeError:
        sent = None
    if not isinstance(sent, dict):  # an extra_body that is not an object: nothing to count against
        rec.fail("malformed", f"the {api} request body sent is not a JSON object")
        return
    read_ranking(rec, payload, api, sent)
