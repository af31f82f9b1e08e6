"""The aiohttp application: routes, auth, fault decisions, and serving.

A request to a completions endpoint goes: auth (401) -> body (400) -> the
fault draw -> injected failure (500) -> rate limit (429) -> a
:class:`~loadtest.mock.engine.Sequence` in the engine. Streams get their
response head at once and then their chunks from the engine's step loop (see
:mod:`loadtest.mock.stream`); non-streaming requests wait for the sequence to
finish and get one JSON body.

Status counting hooks aiohttp's ``on_response_prepare`` signal, which fires
whenever a response head is about to be sent, whoever built it (our handlers,
aiohttp's own 404/405/413, or the 500 of an unexpected exception). So
``loadtest_mock_requests_total`` counts every request, and it is incremented
before the client can have seen the status.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Awaitable, Callable

from aiohttp import web

from loadtest.mock import wire
from loadtest.mock.arrival_log import ArrivalLog
from loadtest.mock.config import MockConfig
from loadtest.mock.pooled_routes import POOLED_PATHS, add_pooled_routes
from loadtest.mock.prefix_cache import PrefixCache
from loadtest.mock.engine import Engine, Outcome, Sequence
from loadtest.mock.faults import FaultInjector, FaultPlan, middle_chunk
from loadtest.mock.metrics import CLIENT_CLOSED, MockMetrics, render
from loadtest.mock.parse import BadRequest, CompletionRequest, parse_request
from loadtest.mock.request_log import RequestLog, TimedSink, open_log, prompt_text
from loadtest.mock.stream import AliveSink, StreamSink
from loadtest.mock.responses import ResponsesEncoder, parse_responses
from loadtest.mock.structured import StructuredEncoder

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
RESPONSES_PATH = "/v1/responses"
_COUNTED_PATHS = frozenset({CHAT_PATH, COMPLETIONS_PATH, RESPONSES_PATH, *POOLED_PATHS})

_JSON = "application/json"
_SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}

#: Request key under which a handler leaves how the request ended (see MockMetrics.outcomes).
_OUTCOME = "loadtest.outcome"

#: How often a hung request looks whether its client left (aiohttp does not cancel
#: handlers when the peer closes, so the hang polls the transport).
_HANG_POLL_S = 0.05

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """An OpenAI-style error (``{"error": {...}}``) with an HTTP status."""
    return web.Response(
        status=status,
        body=wire.error_body(message, type=type, param=param, code=code),
        content_type=_JSON,
        headers=headers,
    )


class MockService:
    """The mock's state (config, engine, faults, counters) and its handlers."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.engine = Engine(config)
        self.faults = FaultInjector(config)
        self.metrics = MockMetrics()
        self.started = int(time.time())
        self._auth = f"Bearer {config.api_key}" if config.api_key is not None else None
        self.request_log = open_log("--request-log", RequestLog, config.request_log)
        self.arrival_log = open_log("--arrival-log", ArrivalLog, config.arrival_log)
        #: Its own stream, so the other faults' draws stay as they were for a --seed.
        self._broken_rng = random.Random(f"broken-json-{config.seed}")
        self.prefix_cache = (
            PrefixCache(config.prefix_cache_blocks, config.prefix_cache_block_tokens)
            if config.prefix_cache_blocks > 0 else None
        )

    # -- the application ----------------------------------------------------

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post(CHAT_PATH, self._chat)
        app.router.add_post(COMPLETIONS_PATH, self._completions)
        app.router.add_post(RESPONSES_PATH, self._responses)
        add_pooled_routes(app, self, error_response, _OUTCOME)  # embeddings, rerank, score: one body each
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.on_response_prepare.append(self._count_status)
        app.on_startup.append(self._on_startup)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        self.engine.start()

    async def _on_shutdown(self, app: web.Application) -> None:
        # Release every waiting handler so that shutdown does not wait on them.
        await self.engine.stop()

    async def _count_status(self, request: web.Request, response: web.StreamResponse) -> None:
        if request.path in _COUNTED_PATHS:
            self.metrics.requests_by_status[response.status] += 1

    # -- small routes -------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=render(self.config, self.engine, self.metrics, self.prefix_cache),
            content_type="text/plain",
            charset="utf-8",
            headers={"Cache-Control": "no-cache"},
        )

    async def _models(self, request: web.Request) -> web.Response:
        if (denied := self._check_auth(request)) is not None:
            return denied
        return web.Response(
            body=wire.models_body(self.config.model_name, self.started, _model_meta(self.config)),
            content_type=_JSON,
        )

    def _check_auth(self, request: web.Request) -> web.Response | None:
        if self._auth is None or request.headers.get("Authorization") == self._auth:
            return None
        return error_response(
            401,
            "Incorrect API key provided. The mock expects 'Authorization: Bearer <--api-key>'.",
            code="invalid_api_key",
        )

    # -- completions --------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=False)

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=True, responses=True)

    async def _complete(self, request: web.Request, *, chat: bool, responses: bool = False) -> web.StreamResponse:
        """Handle one request and count how it ended (exactly one outcome per request)."""
        if self.arrival_log is not None:
            self.arrival_log.write(request.path)
        request[_OUTCOME] = "client_left"  # unless a path below says otherwise
        try:
            return await self._handle(request, chat=chat, responses=responses)
        finally:
            self.metrics.outcomes[request[_OUTCOME]] += 1

    async def _handle(self, request: web.Request, *, chat: bool, responses: bool = False) -> web.StreamResponse:
        if (denied := self._check_auth(request)) is not None:
            request[_OUTCOME] = "http_4xx"
            return denied
        arrival = time.perf_counter()
        body = await request.read()
        try:
            req = parse_responses(body) if responses else parse_request(
                body, chat=chat, vision=(self.config.image_tokens, self.config.pixels_per_token))
        except BadRequest as err:
            request[_OUTCOME] = "http_4xx"
            return error_response(400, err.message, param=err.param)
        if self.request_log is not None:
            request["loadtest.log"] = (arrival, prompt_text(body, chat=chat))

        plan = self.faults.draw()
        if plan.fail:
            self.metrics.faults["fail"] += 1
            request[_OUTCOME] = "http_500"
            return error_response(
                500, "Injected failure (--fail-rate).", type="server_error", code="mock_failure"
            )
        limit = self.config.rate_limit_queue
        if limit is not None and self.engine.queue_depth_if_added() > limit:
            self.metrics.faults["rate_limit"] += 1
            request[_OUTCOME] = "http_429"
            return error_response(
                429,
                f"Rate limit reached: more than {limit} requests would wait (--rate-limit-queue).",
                type="requests",
                code="rate_limit_exceeded",
                headers={"Retry-After": str(self.config.retry_after_s)},
            )

        transport = request.transport
        if transport is None or transport.is_closing():
            return web.Response(status=CLIENT_CLOSED)
        if plan.hang:
            self.metrics.faults["hang"] += 1
            await self._hang(transport)
            if self.engine.stopped:
                request[_OUTCOME] = "shutdown"
            return web.Response(status=CLIENT_CLOSED)
        if req.stream:
            return await self._stream(request, transport, req, plan)
        return await self._unary(request, transport, req, plan)

    async def _hang(self, transport: asyncio.Transport) -> None:
        """Hold the request without a byte until the client closes, or the server stops."""
        while not transport.is_closing() and not self.engine.stopped:
            await asyncio.sleep(_HANG_POLL_S)

    def _cached(self, req: CompletionRequest) -> int | None:
        """The request's prompt tokens the prefix cache holds (None: no cache, and usage says nothing)."""
        return self.prefix_cache.lookup(req.prompt) if self.prefix_cache is not None else None

    def _stall(self, req: CompletionRequest, plan: FaultPlan) -> tuple[int, float]:
        """(stall_at, stall_s) for the engine: pause after the middle chunk's tokens."""
        if not plan.stall:
            return 0, 0.0
        self.metrics.faults["stall"] += 1
        k = self.config.tokens_per_chunk
        n_chunks = -(-req.max_tokens // k)
        # After the tokens of the first middle_chunk() chunks were sent; at least one
        # token, since a stall before the first token would be a TTFT fault instead.
        return max(1, middle_chunk(n_chunks) * k), self.config.stall_s

    async def _stream(
        self,
        request: web.Request,
        transport: asyncio.Transport,
        req: CompletionRequest,
        plan: FaultPlan,
    ) -> web.StreamResponse:
        cfg = self.config
        k = cfg.tokens_per_chunk
        n_chunks = -(-req.max_tokens // k)
        mid = middle_chunk(n_chunks)
        if plan.drop:
            self.metrics.faults["drop"] += 1
        if plan.malformed:
            self.metrics.faults["malformed"] += 1
        cached = self._cached(req)
        resp = web.StreamResponse(status=200, headers=_SSE_HEADERS)
        try:
            writer = await resp.prepare(request)
        except ConnectionError:
            return resp  # the client left while we were deciding
        chunked = bool(getattr(writer, "chunked", request.version >= (1, 1)))
        structured = req.structured
        broken = structured is not None and self._broken_rng.random() < cfg.broken_json_rate
        if broken:
            self.metrics.faults["broken_json"] += 1
        kinds = {"plan": structured, "style": cfg.tool_call_style, "broken": broken} if structured else {}
        kind = ResponsesEncoder if req.responses else StructuredEncoder if structured else wire.StreamEncoder
        encoder = kind(
            **kinds,
            chat=req.chat,
            request_id=wire.new_request_id(req.chat),
            created=int(time.time()),
            model=req.model,
            prompt_tokens=req.prompt_tokens,
            max_tokens=req.max_tokens,
            tokens_per_chunk=k,
            include_usage=req.include_usage,
            continuous_usage=req.continuous_usage,
            stamp=cfg.stamp_chunks,
            chunked=chunked,
            cached_tokens=cached,
        )
        sink = StreamSink(
            transport,
            encoder,
            tokens_per_chunk=k,
            drop_chunk=mid if plan.drop else -1,
            malformed_chunk=mid if plan.malformed else -1,
        )
        stall_at, stall_s = self._stall(req, plan)
        logged = request.get("loadtest.log")
        if logged is not None:
            sink = TimedSink(sink)
        seq = Sequence(req.prompt_tokens, req.max_tokens, sink, stall_at=stall_at, stall_s=stall_s,
                       cached_tokens=cached or 0)
        self.engine.submit(seq)
        outcome = await seq.done
        request[_OUTCOME] = _stream_outcome(
            outcome, dropped=sink.dropped, malformed=sink.malformed_sent
        )
        if logged is not None and self.request_log is not None:
            self.request_log.write(logged[0], sink, outcome.value, logged[1], req.model, request.path_qs)
        # FINISHED: the engine wrote everything up to [DONE]; aiohttp writes the
        # last (empty) HTTP chunk when we return. ABORTED: the connection is
        # gone or was cut on purpose, and aiohttp's final write fails quietly.
        # SHUTDOWN: cut it too, so that no client takes half a stream for a whole.
        if outcome is Outcome.SHUTDOWN:
            transport.close()
        return resp

    async def _unary(
        self,
        request: web.Request,
        transport: asyncio.Transport,
        req: CompletionRequest,
        plan: FaultPlan,
    ) -> web.StreamResponse:
        if plan.drop:
            self.metrics.faults["drop"] += 1
        sink = AliveSink(transport, drop_at=max(1, req.max_tokens // 2) if plan.drop else -1)
        stall_at, stall_s = self._stall(req, plan)
        cached = self._cached(req)
        seq = Sequence(req.prompt_tokens, req.max_tokens, sink, stall_at=stall_at, stall_s=stall_s,
                       cached_tokens=cached or 0)
        self.engine.submit(seq)
        outcome = await seq.done
        request[_OUTCOME] = _stream_outcome(
            outcome, dropped=sink.dropped, malformed=plan.malformed and outcome is Outcome.FINISHED
        )
        if outcome is Outcome.SHUTDOWN:
            return error_response(503, "The mock is shutting down.", type="server_error")
        if outcome is Outcome.ABORTED and not sink.dropped:
            return web.Response(status=CLIENT_CLOSED)  # nobody is listening
        body = wire.unary_body(
            chat=req.chat,
            request_id=wire.new_request_id(req.chat),
            model=req.model,
            prompt_tokens=req.prompt_tokens,
            completion_tokens=req.max_tokens,
            cached_tokens=cached,
        )
        if plan.malformed:
            self.metrics.faults["malformed"] += 1
            return web.Response(body=body[: len(body) // 2], content_type=_JSON)
        if sink.dropped:
            # A 200 head that promises the whole body, half of it, then the cut.
            resp = web.StreamResponse(status=200, headers={"Content-Type": _JSON})
            resp.content_length = len(body)
            await resp.prepare(request)
            await resp.write(body[: len(body) // 2])
            transport.close()
            return resp
        return web.Response(body=body, content_type=_JSON)


def _stream_outcome(outcome: Outcome, *, dropped: bool, malformed: bool) -> str:
    """The outcome counted for a request that was admitted to the engine.

    A malformed chunk is the request's outcome once it was sent, even if the
    client then hangs up (a client that cannot parse a chunk should).
    """
    if outcome is Outcome.SHUTDOWN:
        return "shutdown"
    if dropped:
        return "dropped"
    if malformed:
        return "malformed"
    return "client_left" if outcome is Outcome.ABORTED else "ok"


__all__ = ["MockService", "error_response"]


def _model_meta(config: MockConfig) -> dict | None:
    """llama.cpp-style ``meta`` for /v1/models in roofline mode: what the model weighs."""
    if config.roofline_hbm_gbps is None:
        return None
    params = config.roofline_params_b * 1e9
    return {"n_params": int(params), "size": int(params * config.roofline_bytes_per_weight)}
