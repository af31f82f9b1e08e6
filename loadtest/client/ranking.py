"""Rerank and score: a query against a batch of documents, one JSON body in and out.

Two request kinds that cross-encoder (and late-interaction) models serve, not streamed, like
embeddings (:mod:`loadtest.client.unary`):

- ``rerank``: ``POST {base_url}/rerank`` with ``{model, query, documents, top_n}``, the body of
  Cohere's and Jina's ``/v1/rerank``, vLLM's ``/rerank``, ``/v1/rerank`` and ``/v2/rerank`` and
  llama-server's ``/v1/rerank``. The answer is ``{results: [{index, relevance_score,
  document?}], usage?}``: vLLM's and Jina's usage has ``prompt_tokens``/``total_tokens`` (older
  vLLM only ``total_tokens``), Cohere's none (``meta.billed_units``; the prompt tokens are then
  the harness's estimate). TEI's own ``/rerank`` takes ``texts``, not ``documents``: not this body.
- ``score``: vLLM's ``POST {base_url}/score`` with ``{model, text_1, text_2}``: one query
  (``text_1``) against ``text_2``'s texts, each a pair; the answer is ``{object: list, data:
  [{index, object: score, score}], usage}``.

The same accounting rules as for every kind: the answer must hold one result per document (or
``top_n``) and per pair, each with an index it was sent and a numeric score, else it is
``malformed``, never a success; the number of inputs (``items``: documents or pairs) comes from
the body sent, so a server that drops some cannot look faster per item.
"""

from __future__ import annotations

from typing import Any, Mapping

import orjson

from loadtest.client.record import RequestRecord

#: The request kinds of this module.
RANKING_APIS = frozenset({"rerank", "score"})


def ranking_body(api: str, model: str, texts: str | list[str], fields: Mapping[str, Any] | None,
                 extra_body: Mapping[str, Any] | None) -> bytes:
    """The body: ``texts[0]`` is the query (``text_1``), the rest its documents (``text_2``).

    A single string (the preflight's probe) is a query with itself as its one document. Rerank
    asks for every document back (``top_n`` = their count) unless ``extra_body`` says otherwise:
    vLLM reads 0 as all, Cohere and Jina default to all, so the explicit count means the same everywhere.
    """
    items = [texts] if isinstance(texts, str) else list(texts)
    query, documents = items[0], (items[1:] or items[:1])
    body: dict[str, Any] = (
        {"model": model, "query": query, "documents": documents, "top_n": len(documents)} if api == "rerank"
        else {"model": model, "text_1": query, "text_2": documents}
    )
    body.update(fields or {})
    body.update(extra_body or {})
    return orjson.dumps(body)


def expected_results(kind: str, sent: Mapping[str, Any]) -> tuple[int, int]:
    """(inputs sent: documents or pairs, results the answer must hold)."""
    if kind == "rerank":
        docs = sent.get("documents")
        n = len(docs) if isinstance(docs, list) else 1
        top = sent.get("top_n")
        return n, (min(top, n) if type(top) is int and top > 0 else n)
    t1, t2 = sent.get("text_1"), sent.get("text_2")
    n = max(len(t1) if isinstance(t1, list) else 1, len(t2) if isinstance(t2, list) else 1)
    return n, n


def read_ranking(rec: RequestRecord, payload: bytes, kind: str, sent: Mapping[str, Any]) -> None:
    """Fill ``rec`` from a rerank or score answer (read whole; the caller stamped the end)."""
    n, want = expected_results(kind, sent)
    rec.items = n  # what was asked, whatever came back
    try:
        obj: Any = orjson.loads(payload)
    except orjson.JSONDecodeError:
        rec.fail("malformed", f"{kind} body is not JSON: {payload[:120]!r}")
        return
    if isinstance(obj, dict) and obj.get("error"):
        err = obj["error"]
        rec.fail("stream_error", f"error in body: {err.get('message', err) if isinstance(err, dict) else err}")
        return
    results = obj.get("results" if kind == "rerank" else "data") if isinstance(obj, dict) else None
    usage = obj.get("usage") if isinstance(obj, dict) else None
    if not isinstance(results, list):
        rec.fail("malformed", f"{kind} body has no '{'results' if kind == 'rerank' else 'data'}' list: {payload[:120]!r}")
        return
    seen = {r["index"] for r in results if isinstance(r, dict) and _scored(r) and type(r.get("index")) is int
            and 0 <= r["index"] < n}
    if len(seen) < want:
        rec.fail("malformed", f"{len(seen)} scored results for {want} {'documents' if kind == 'rerank' else 'pairs'}")
        return
    if isinstance(usage, dict):
        tokens = usage.get("prompt_tokens", usage.get("total_tokens"))
        if type(tokens) is int and tokens >= 0:
            rec.prompt_tokens = tokens
            rec.token_source = "usage"
    rec.completion_tokens = 0


def _scored(result: Mapping[str, Any]) -> bool:
    score = result.get("relevance_score", result.get("score"))
    return isinstance(score, (int, float)) and not isinstance(score, bool)
