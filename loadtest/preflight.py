"""Before any load: check that the target answers a streaming request, and learn its dialect.

A capacity run against a wrong URL, a bad key or a server that does not stream
would produce a folder full of errors and a meaningless verdict, so one request
goes first and any problem stops the run with a clear message (exit code 3).

It also adapts the request body to what the server accepts. Servers reject
fields they do not know: OpenAI and Azure refuse ``ignore_eos`` and
``continuous_usage_stats``, reasoning models refuse ``temperature`` and want
``max_completion_tokens``, FastAPI-based servers answer 422. When a 400 or 422
names one of the optional fields (:data:`~loadtest.client.wire.DROPPABLE`), that
field is dropped (or ``max_tokens`` renamed) and the request sent again; each
change is one line on the console and an entry in ``run.json``. A rejection
that names nothing we may drop is reported as is: fields the user asked for
(``extra_body``) are never dropped behind their back.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import gevent.pool

from loadtest.analysis.failures import kinds_text
from loadtest.client.proxy import ProxyError
from loadtest.client.record import RequestRecord
from loadtest.client.stream import StreamingClient, client_for
from loadtest.client.unary import UNARY_APIS
from loadtest.client.wire import DROPPABLE, PATHS, Dialect, build_body
from loadtest.errors import InputError, TargetError
from loadtest.redact import public_url
from loadtest.run_record import Preflight
from loadtest.scenario import Scenario, typical_tokens
from loadtest.scenario._structured import body_fields
from loadtest.urls import request_url
from loadtest.workload import Workload

_PREFLIGHT_TOKENS = 8
#: With tools or a response_format: a server streams nothing of a tool call before the function's
#: name is whole (llama-server: a dozen tokens), so the probe may use the workload's length, up to this.
_STRUCTURED_PREFLIGHT_TOKENS = 64
#: A server that fails some requests (5xx, dropped or malformed streams, 429)
#: is still a valid target: its failures are what the run will measure. The
#: preflight only needs one success, so it tries a few times.
_ATTEMPTS = 5
_TRANSIENT = {"http_5xx", "rate_limited", "disconnect", "malformed", "stream_error", "aborted", "empty"}
_REJECTED = (400, 422)


@dataclass
class PreflightResult:
    continuous_usage: bool
    ttft_ms: float
    token_source: str
    record: RequestRecord
    #: Every attempt's outcome (also the failed ones), for run.json.
    attempts: list[dict]
    #: The body the target accepts (fields dropped, max_tokens field).
    dialect: Dialect = field(default_factory=Dialect)
    #: Each change made to the body, in order: {"field", "action", "status", "reason"}.
    adaptations: list[dict] = field(default_factory=list)

    def to_record(self) -> Preflight:
        """run.json's ``preflight``."""
        return Preflight(
            ttft_ms=round(self.ttft_ms, 3), token_source=self.token_source, continuous_usage=self.continuous_usage,
            attempts=self.attempts, dropped_fields=list(self.dialect.drop),
            max_tokens_field=self.dialect.max_tokens_field, adaptations=self.adaptations,
        )


def _client(scenario: Scenario, api_key: str | None) -> StreamingClient:
    try:
        return client_for(scenario.target, api_key)
    except ProxyError as err:
        raise InputError(str(err)) from None


def probe_tokens(scenario: Scenario) -> int:
    """The preflight's output length: short, but long enough for a tool call's first delta."""
    w = scenario.workload
    structured = bool(body_fields(w.tools, w.tool_choice, w.response_format))
    return min(typical_tokens(w.max_tokens), _STRUCTURED_PREFLIGHT_TOKENS if structured else _PREFLIGHT_TOKENS)


def _body(scenario: Scenario, dialect: Dialect, max_tokens: int, salt: str = "", seed: int = -1) -> bytes:
    """A short request; each ``seed`` gets its own prompt, prefixed by the run's ``salt``.

    It carries the workload's ``tools``/``tool_choice``/``response_format`` as the run's requests
    do: a server that refuses them fails here in one line, and one that answers only with a tool
    call (``tool_choice: required``) passes, as its answer is content.
    """
    t, w = scenario.target, scenario.workload
    prompt = Workload(scenario, seed=seed, salt=salt).prompt(min(w.prompt_tokens.mean, 64))
    return build_body(
        t.api, t.model, prompt, max_tokens,
        temperature=w.temperature, ignore_eos=w.ignore_eos,
        continuous_usage=dialect.continuous_usage, extra_body=w.extra_body,
        max_tokens_field=dialect.max_tokens_field, drop=dialect.drop,
        fields=body_fields(w.tools, w.tool_choice, w.response_format) or None,
    )


def _sent_fields(scenario: Scenario, dialect: Dialect) -> list[str]:
    """The droppable fields this dialect still sends, most specific first."""
    w = scenario.workload
    sent = {
        "continuous_usage_stats": dialect.continuous_usage and "stream_options" not in dialect.drop,
        "ignore_eos": w.ignore_eos,
        "temperature": w.temperature is not None,
        "stream_options": True,
    }
    return [f for f in DROPPABLE if sent[f] and f not in dialect.drop]


def adapt(scenario: Scenario, dialect: Dialect, rec: RequestRecord) -> tuple[Dialect, dict] | None:
    """The dialect without the field a 400/422 names (and what changed), or None."""
    if rec.status not in _REJECTED:
        return None
    message = rec.error or ""
    change = {"status": rec.status, "reason": message[:300]}
    if (dialect.max_tokens_field == "max_tokens" and "max_tokens" in message
            and "max_completion_tokens" in message):
        return replace(dialect, max_tokens_field="max_completion_tokens"), {
            **change, "field": "max_tokens", "action": "sent as max_completion_tokens"}
    sent = _sent_fields(scenario, dialect)
    for name in sent:
        if name in message or (name == "stream_options" and "include_usage" in message):
            return _without(dialect, name), {**change, "field": name, "action": "dropped"}
    if "continuous_usage_stats" in sent:
        # The server may not say which field it disliked; this is the one most servers reject.
        return _without(dialect, "continuous_usage_stats"), {
            **change, "field": "continuous_usage_stats", "action": "dropped (the rejection named no field)"}
    return None


def _without(dialect: Dialect, name: str) -> Dialect:
    if name == "continuous_usage_stats":
        return replace(dialect, continuous_usage=False, drop=(*dialect.drop, name))
    return replace(dialect, drop=(*dialect.drop, name))


def preflight(scenario: Scenario, api_key: str | None, salt: str = "") -> PreflightResult:
    """Send a short streaming request; raise :class:`TargetError` if the target is unusable."""
    client = _client(scenario, api_key)
    attempts: list[dict] = []
    adaptations: list[dict] = []
    dialect = Dialect(continuous_usage=True, max_tokens_field=scenario.target.max_tokens_field)
    max_tokens = probe_tokens(scenario)

    def send() -> RequestRecord:
        rec = client.send(_body(scenario, dialect, max_tokens, salt))
        attempts.append({"status": rec.status, "error_kind": rec.error_kind,
                         "continuous_usage": dialect.continuous_usage, "drop": list(dialect.drop),
                         "max_tokens_field": dialect.max_tokens_field})
        return rec

    try:
        for _ in range(_ATTEMPTS):
            rec = send()
            for _ in range(len(DROPPABLE) + 1):  # bounded: each step drops or renames one field
                step = adapt(scenario, dialect, rec)
                if step is None:
                    break
                dialect, change = step
                adaptations.append(change)
                rec = send()
            # A timeout after the response began (a stalled stream) is the server's
            # flakiness, not a dead target.
            stalled = rec.error_kind == "timeout" and rec.ttfb_ms == rec.ttfb_ms
            if rec.error_kind not in _TRANSIENT and not stalled:
                break
            gevent.sleep(min(rec.retry_after_s or 0.2, 2.0))
    finally:
        client.close()
    _raise_if_unusable(scenario, rec, len(attempts))
    continuous = rec.token_source == "continuous_usage"
    if not continuous and dialect.continuous_usage:
        dialect = replace(dialect, continuous_usage=False)  # accepted but ignored: do not keep asking
    return PreflightResult(
        continuous_usage=continuous,
        ttft_ms=rec.ttft_ms,
        token_source=rec.token_source,
        record=rec,
        attempts=attempts,
        dialect=dialect,
        adaptations=adaptations,
    )


def short_request(scenario: Scenario, api_key: str | None, dialect: Dialect, salt: str = "",
                  timeout_s: float | None = None) -> RequestRecord:
    """One short request as the load sends them (the dialect the preflight settled), on a client of its
    own; ``timeout_s`` shortens the target's. For the request after the load (loadtest/after_load.py)."""
    client = _client(scenario, api_key)
    if timeout_s is not None:
        client.timeout_s = min(client.timeout_s, timeout_s)
    try:
        return client.send(_body(scenario, dialect, probe_tokens(scenario), salt, seed=-100))
    finally:
        client.close()


def describe_adaptation(change: dict) -> str:
    """One line for the console: what the target rejected and what we do instead."""
    return (f"preflight: the target rejected {change['field']} (HTTP {change['status']}: "
            f"{change['reason'][:120]}); {change['action']}")


def _raise_if_unusable(scenario: Scenario, rec: RequestRecord, tries: int) -> None:
    t = scenario.target
    # the URL the request went to (the base's query after the path), its credentials redacted
    url = public_url(request_url(t.base_url, PATHS[t.api], t.query))
    if rec.error_kind == "connect":
        raise TargetError(f"cannot reach {url}: {rec.error}")
    if rec.error_kind == "timeout":
        raise TargetError(f"{url} did not answer within target.timeout_s = {t.timeout_s:g} s")
    if rec.error_kind == "client_error":
        raise TargetError(f"could not send the preflight request to {url}: {rec.error}")
    if rec.status in (401, 403):
        hint = f"set ${t.api_key_env}" if t.api_key_env else "set target.api_key_env to the variable that holds the key"
        raise TargetError(f"{url} refused the request (HTTP {rec.status}): {rec.error}; {hint}")
    if rec.status == 404:
        raise TargetError(
            f"{url} answered HTTP 404 ({rec.error}); check target.base_url (it usually ends in /v1) and target.model"
        )
    if rec.error_kind == "http_3xx":
        raise TargetError(f"{url} answered with a redirect ({rec.error}); set target.base_url to the final URL")
    if rec.error_kind == "empty":
        raise TargetError(f"{url} streamed no content chunks; is it an OpenAI-compatible streaming endpoint?")
    if not rec.ok:
        raise TargetError(f"the preflight request to {url} failed {tries} times; last ({rec.error_kind}): {rec.error}")
    if not len(rec.chunk_ms) and t.api not in UNARY_APIS:  # embeddings answer in one body, without chunks
        raise TargetError(f"{url} streamed no content chunks; is it an OpenAI-compatible streaming endpoint?")


def warm_up(scenario: Scenario, api_key: str | None, dialect: Dialect | bool, salt: str = "") -> list[RequestRecord]:
    """Send ``load.warmup_requests`` throw-away requests at once (cold caches, connections, JIT)."""
    n = scenario.load.warmup_requests
    if n == 0:
        return []
    if isinstance(dialect, bool):  # the older call: only continuous usage was learned
        dialect = Dialect(continuous_usage=dialect, max_tokens_field=scenario.target.max_tokens_field)
    max_tokens = min(typical_tokens(scenario.workload.max_tokens), 16)

    def one(i: int) -> RequestRecord:
        client = _client(scenario, api_key)
        try:  # every warm-up request has its own prompt: one shared prompt would warm the prefix cache
            return client.send(_body(scenario, dialect, max_tokens, salt, seed=-2 - i))
        finally:
            client.close()

    return list(gevent.pool.Pool(n).imap_unordered(one, range(n)))


def failed_warmup_words(warm: list[RequestRecord]) -> str | None:
    """The warning when warm-up requests failed: how many, of which kinds, and the commonest message; else None.

    Why: a warm-up exists to find what the first level would otherwise meet (a cold server, a
    refusing quota, a gateway timing out). Its failures were counted in ``run.json`` and said
    nowhere, so "5 warm-up requests sent" read like 5 answered while all 5 had been refused.
    """
    failed = [r for r in warm if not r.ok]
    if not failed:
        return None
    named = kinds_text(Counter(r.error_kind or "unknown" for r in failed), top=None)
    messages = [r.error for r in failed if r.error]
    common = max(set(messages), key=messages.count) if messages else ""
    said = f', the commonest "{common[:200]}"' if common else ""
    return (f"warning: {len(failed)} of {len(warm)} warm-up requests failed ({named}{said}); the first level "
            "may meet the same (its errors are counted in its error rate)")
