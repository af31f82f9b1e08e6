"""Before any load: check that the target answers a streaming request.

A capacity run against a wrong URL, a bad key or a server that does not stream
would produce a folder full of errors and a meaningless verdict, so one request
goes first and any problem stops the run with a clear message (exit code 3).
It also learns whether the server accepts ``continuous_usage_stats`` (vLLM
does; OpenAI's API rejects unknown stream options with a 400).
"""

from __future__ import annotations

from dataclasses import dataclass

import gevent.pool

from loadtest.client.record import RequestRecord
from loadtest.client.stream import StreamingClient, client_for
from loadtest.client.wire import PATHS, build_body
from loadtest.errors import TargetError
from loadtest.scenario import Scenario, typical_tokens
from loadtest.workload import Workload

_PREFLIGHT_TOKENS = 8
#: A server that fails some requests (5xx, dropped or malformed streams, 429)
#: is still a valid target: its failures are what the run will measure. The
#: preflight only needs one success, so it tries a few times.
_ATTEMPTS = 5
_TRANSIENT = {"http_5xx", "rate_limited", "disconnect", "malformed", "stream_error"}


@dataclass
class PreflightResult:
    continuous_usage: bool
    ttft_ms: float
    token_source: str
    record: RequestRecord
    #: Every attempt's outcome (also the failed ones), for run.json.
    attempts: list[dict]


def _client(scenario: Scenario, api_key: str | None) -> StreamingClient:
    return client_for(scenario.target, api_key)


def _body(scenario: Scenario, continuous_usage: bool, max_tokens: int, salt: str = "", seed: int = -1) -> bytes:
    """A short request; each ``seed`` gets its own prompt, prefixed by the run's ``salt``."""
    t, w = scenario.target, scenario.workload
    prompt = Workload(scenario, seed=seed, salt=salt).prompt(min(w.prompt_tokens.mean, 64))
    return build_body(
        t.api, t.model, prompt, max_tokens,
        temperature=w.temperature, ignore_eos=w.ignore_eos,
        continuous_usage=continuous_usage, extra_body=w.extra_body,
    )


def preflight(scenario: Scenario, api_key: str | None, salt: str = "") -> PreflightResult:
    """Send a short streaming request; raise :class:`TargetError` if the target is unusable."""
    client = _client(scenario, api_key)
    attempts: list[dict] = []
    try:
        max_tokens = min(typical_tokens(scenario.workload.max_tokens), _PREFLIGHT_TOKENS)
        continuous = True
        for _ in range(_ATTEMPTS):
            rec = client.send(_body(scenario, continuous, max_tokens, salt))
            attempts.append({"status": rec.status, "error_kind": rec.error_kind, "continuous_usage": continuous})
            if rec.status == 400 and continuous:
                continuous = False  # the server may not know continuous_usage_stats: ask without it
                rec = client.send(_body(scenario, continuous, max_tokens, salt))
                attempts.append({"status": rec.status, "error_kind": rec.error_kind, "continuous_usage": continuous})
            # A timeout after the response began (a stalled stream) is the server's
            # flakiness, not a dead target.
            stalled = rec.error_kind == "timeout" and rec.ttfb_ms == rec.ttfb_ms
            if rec.error_kind not in _TRANSIENT and not stalled:
                break
            gevent.sleep(min(rec.retry_after_s or 0.2, 2.0))
    finally:
        client.close()
    _raise_if_unusable(scenario, rec, len(attempts))
    return PreflightResult(
        continuous_usage=rec.token_source == "continuous_usage",
        ttft_ms=rec.ttft_ms,
        token_source=rec.token_source,
        record=rec,
        attempts=attempts,
    )


def _raise_if_unusable(scenario: Scenario, rec: RequestRecord, tries: int) -> None:
    t = scenario.target
    url = t.base_url + PATHS[t.api]
    if rec.error_kind == "connect":
        raise TargetError(f"cannot reach {url}: {rec.error}")
    if rec.error_kind == "timeout":
        raise TargetError(f"{url} did not answer within target.timeout_s = {t.timeout_s:g} s")
    if rec.status in (401, 403):
        hint = f"set ${t.api_key_env}" if t.api_key_env else "set target.api_key_env to the variable that holds the key"
        raise TargetError(f"{url} refused the request (HTTP {rec.status}): {rec.error}; {hint}")
    if rec.status == 404:
        raise TargetError(
            f"{url} answered HTTP 404 ({rec.error}); check target.base_url (it usually ends in /v1) and target.model"
        )
    if not rec.ok:
        raise TargetError(f"the preflight request to {url} failed {tries} times; last ({rec.error_kind}): {rec.error}")
    if not len(rec.chunk_ms):
        raise TargetError(f"{url} streamed no content chunks; is it an OpenAI-compatible streaming endpoint?")


def warm_up(scenario: Scenario, api_key: str | None, continuous_usage: bool, salt: str = "") -> list[RequestRecord]:
    """Send ``load.warmup_requests`` throw-away requests at once (cold caches, connections, JIT)."""
    n = scenario.load.warmup_requests
    if n == 0:
        return []
    max_tokens = min(typical_tokens(scenario.workload.max_tokens), 16)

    def one(i: int) -> RequestRecord:
        client = _client(scenario, api_key)
        try:  # every warm-up request has its own prompt: one shared prompt would warm the prefix cache
            return client.send(_body(scenario, continuous_usage, max_tokens, salt, seed=-2 - i))
        finally:
            client.close()

    return list(gevent.pool.Pool(n).imap_unordered(one, range(n)))
