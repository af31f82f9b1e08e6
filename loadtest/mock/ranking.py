"""``POST /v1/rerank`` (and ``/rerank``, ``/v2/rerank``) and ``POST /v1/score`` (``/score``) for the mock.

The bodies and answers are vLLM's (``vllm/entrypoints/pooling/score/protocol.py``): rerank takes
``{model, query, documents, top_n}`` and answers ``{id, model, usage: {prompt_tokens,
total_tokens}, results: [{index, document: {text}, relevance_score}]}`` sorted by relevance
(``top_n`` 0 or absent: all); score takes ``{model, text_1, text_2}`` (a string or a list each;
one ``text_1`` is paired with every ``text_2``) and answers ``{id, object: list, created, model,
data: [{index, object: score, score}], usage}``.

The cost is the engine's, as for embeddings (:mod:`embeddings`): a cross-encoder reads each
pair as one sequence of the query's and the document's tokens, so a request is one step whose
prefill is ``P`` per token of all its pairs together, ``L = Σ (query + document_i)``; with ``c``
closed-loop users the e2e latency is about ``c × (P × L + S) + 2 × B`` once the engine is busy.
``usage.prompt_tokens`` is that ``L``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from loadtest.mock.parse import BadRequest, count_words, json_body

RERANK_PATHS = ("/v1/rerank", "/rerank", "/v2/rerank")
SCORE_PATHS = ("/v1/score", "/score")


@dataclass(frozen=True, slots=True)
class RankingRequest:
    """One rerank or score request: its pairs' texts and what the answer must hold."""

    kind: str  # "rerank" | "score"
    model: str
    documents: tuple[str, ...]  # rerank: the documents; score: text_2's texts (one pair each)
    prompt_tokens: int  # Σ over pairs of (query + document) words
    top_n: int  # rerank: results to return (0: all)


def _texts(value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise BadRequest(f"Invalid '{field}': expected a string or a non-empty array of strings.", field)
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise BadRequest(f"Invalid '{field}[{i}]': expected a non-empty string.", f"{field}[{i}]")
    return value


def parse_rerank(body: bytes) -> RankingRequest:
    data = json_body(body)
    query = data.get("query")
    if not isinstance(query, str) or not query:
        raise BadRequest("Invalid 'query': expected a non-empty string.", "query")
    documents = _texts(data.get("documents"), "documents")
    top_n = data.get("top_n", 0)
    if type(top_n) is not int or top_n < 0:
        raise BadRequest("Invalid 'top_n': expected a non-negative integer.", "top_n")
    q = count_words(query)
    tokens = sum(q + count_words(d) for d in documents)
    return RankingRequest("rerank", data["model"], tuple(documents), tokens, top_n)


def parse_score(body: bytes) -> RankingRequest:
    data = json_body(body)
    first, second = _texts(data.get("text_1"), "text_1"), _texts(data.get("text_2"), "text_2")
    if len(first) == 1:
        first = first * len(second)
    elif len(second) == 1:
        second = second * len(first)
    if len(first) != len(second):
        raise BadRequest(f"text_1 and text_2 must pair up: {len(first)} and {len(second)} texts.", "text_2")
    tokens = sum(count_words(a) + count_words(b) for a, b in zip(first, second))
    return RankingRequest("score", data["model"], tuple(second), tokens, 0)


def relevance(i: int, text: str) -> float:
    """A made-up relevance in (0, 1): fixed per text, so answers are reproducible."""
    return round(((len(text) * 31 + i * 17) % 997) / 1000.0 + 0.001, 6)


def ranking_body(req: RankingRequest) -> bytes:
    """vLLM's rerank or score answer for ``req`` (see the module doc)."""
    usage = {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens}
    scores = [relevance(i, d) for i, d in enumerate(req.documents)]
    if req.kind == "rerank":
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        keep = order[: req.top_n] if req.top_n else order
        return orjson.dumps({
            "id": f"rerank-{uuid.uuid4().hex}", "model": req.model, "usage": usage,
            "results": [{"index": i, "document": {"text": req.documents[i]}, "relevance_score": scores[i]} for i in keep],
        })
    return orjson.dumps({
        "id": f"score-{uuid.uuid4().hex}", "object": "list", "created": int(time.time()), "model": req.model,
        "data": [{"index": i, "object": "score", "score": s} for i, s in enumerate(scores)],
        "usage": {**usage, "completion_tokens": 0},
    })
