"""The mock's routes answered in one JSON body: embeddings, rerank and score.

Each is one engine step whose prefill is the request's input tokens (:mod:`embeddings`,
:mod:`ranking`); this module only wires them into the app, counting each request's outcome
once as the streaming routes do. It lives apart from :mod:`server` to keep that one idea.
"""

from __future__ import annotations

from typing import Any, Callable

from aiohttp import web

from loadtest.mock.embeddings import serve_embeddings
from loadtest.mock.ranking import RERANK_PATHS, SCORE_PATHS, parse_rerank, parse_score, ranking_body

EMBEDDINGS_PATH = "/v1/embeddings"
#: Every path of these routes (vLLM's three rerank paths, Cohere's and Jina's /v1/rerank among them).
POOLED_PATHS = (EMBEDDINGS_PATH, *RERANK_PATHS, *SCORE_PATHS)


def add_pooled_routes(app: web.Application, service: Any, error_response: Callable[..., web.Response],
                      outcome_key: str) -> None:
    """Register the embeddings, rerank and score routes of ``service`` (the :class:`MockService`)."""

    def route(*kind: Any) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.StreamResponse:
            request[outcome_key] = "client_left"  # unless the work below says otherwise
            try:
                return await serve_embeddings(service, request, error_response, outcome_key, *kind)
            finally:
                service.metrics.outcomes[request[outcome_key]] += 1
        return handle

    app.router.add_post(EMBEDDINGS_PATH, route())
    for path in RERANK_PATHS:
        app.router.add_post(path, route(parse_rerank, ranking_body))
    for path in SCORE_PATHS:
        app.router.add_post(path, route(parse_score, ranking_body))
