"""``target:``: where the endpoint is, how to reach it, and what it serves."""

from __future__ import annotations

import os
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from loadtest.paths import pem_bundle_problem
from loadtest.scenario._base import PositiveFloat, PositiveInt, _Strict


def _http(v: str) -> str:
    if not v.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return v


_CONTROL_NAMES = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab"}


def _control_character(value: str) -> str | None:
    """The first control character of ``value``, described (which, and roughly where), or None."""
    for i, c in enumerate(value):
        if ord(c) < 32 or ord(c) == 127:
            name = _CONTROL_NAMES.get(c, f"U+{ord(c):04X}")
            # where, roughly: an index would tell the key's length
            return f"{name} at the end" if i == len(value) - 1 else f"{name} inside it"
    return None


class PrometheusSource(_Strict):
    """``target.metrics.prometheus``: read the replicas' signals from a Prometheus server (query_range)."""

    #: The Prometheus server's base URL (its HTTP API is under ``/api/v1``).
    url: str
    #: Label matchers that pick the replicas' series, e.g. ``job="vllm"`` or ``{namespace="llm",pod=~"vllm-.*"}``.
    selector: str = ""
    #: The label naming a replica; default: ``pod`` where the series have it, else ``instance``.
    replica_label: str | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        return _http(v).rstrip("/")

    @field_validator("selector")
    @classmethod
    def _matchers(cls, v: str) -> str:
        v = v.strip()
        if v.startswith("{") != v.endswith("}"):
            raise ValueError("must be label matchers, with or without the braces: job=\"vllm\" or {job=\"vllm\"}")
        return v


class ServerMetrics(_Strict):
    """Scraping the target's Prometheus endpoint during the run (``target.metrics``).

    ``target.metrics: false`` turns it off; ``true`` or a mapping turns it on. One source:
    ``url`` (default: the base URL's origin), ``urls`` (one per replica) or ``prometheus``.
    """

    enabled: bool = True
    #: Default: the base URL's origin + ``/metrics`` (where vLLM, SGLang, TGI and llama-server serve it).
    url: str | None = None
    #: Each replica's own metrics endpoint (a fleet behind a load balancer), scraped side by side.
    urls: list[str] = Field(default_factory=list)
    #: Or read every replica's signals from Prometheus after the run (in a cluster, where pods are not reachable).
    prometheus: PrometheusSource | None = None
    interval_s: PositiveFloat = 1.0
    #: Extra metric names to summarize per level and consider for autoscaling (beyond the known ones).
    signals: list[str] = Field(default_factory=list)

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        return v if v is None else _http(v)

    @field_validator("urls")
    @classmethod
    def _http_urls(cls, v: list[str]) -> list[str]:
        for url in v:
            _http(url)
        if len(set(v)) != len(v):
            raise ValueError("names one URL twice")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> "ServerMetrics":
        given = [name for name, on in (("url", self.url), ("urls", self.urls), ("prometheus", self.prometheus)) if on]
        if len(given) > 1:
            raise ValueError(f"give one source of server metrics, not {' and '.join(given)}")
        return self


class Target(_Strict):
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "mock-model"
    #: embeddings: not streamed; latency is e2e, throughput input tokens and items per second.
    #: responses: OpenAI's Responses API (/v1/responses), streamed as named events.
    #: rerank (/rerank: a query and documents) and score (vLLM's /score: text_1 against text_2): not
    #: streamed either, like embeddings; items are the documents or pairs.
    api: Literal["chat", "completions", "embeddings", "responses", "rerank", "score"] = "chat"
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    #: Header values read from environment variables at run time: {header: ENV_VAR}
    #: (Azure's ``api-key``), so a secret never has to be written into the YAML.
    headers_env: dict[str, str] = Field(default_factory=dict)
    #: Extra query parameters on every request (Azure's ``api-version``).
    query: dict[str, str] = Field(default_factory=dict)
    #: The body field for the output length: OpenAI's reasoning models want ``max_completion_tokens``.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    timeout_s: PositiveFloat = 120.0
    #: HTTPS only: check the server's certificate (false for a self-signed test endpoint).
    verify_tls: bool = True
    #: HTTPS only: a PEM file of CA certificates to trust (a private CA), instead of the system's.
    ca_bundle: str | None = None
    #: The server's own view during the run: false, true, or {url | urls | prometheus, interval_s, signals}.
    metrics: ServerMetrics = ServerMetrics()
    #: How many replicas serve the base URL (declared); else counted from the metrics' sources.
    replicas: PositiveInt | None = None
    #: Further body, query or header names whose values are secret (beyond key/token/secret/password/…).
    secret_fields: list[str] = Field(default_factory=list)

    @field_validator("metrics", mode="before")
    @classmethod
    def _metrics_switch(cls, v: Any) -> Any:
        return {"enabled": v} if isinstance(v, bool) else v

    @property
    def metrics_url(self) -> str:
        """Where the server's Prometheus text is: ``metrics.url``, else the base URL's origin + /metrics."""
        if self.metrics.url:
            return self.metrics.url
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.netloc}/metrics"

    @field_validator("ca_bundle")
    @classmethod
    def _bundle_exists(cls, v: str | None) -> str | None:
        problem = pem_bundle_problem(v) if v is not None else None
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        if any(c in v for c in "\r\n "):
            raise ValueError("must not contain spaces or line breaks")
        # what the client will ask of it, here, so that a bad host or port is this one line and
        # not a traceback when the first user connects
        try:
            parts = urlsplit(v)
            port = parts.port
        except ValueError as err:  # an unclosed IPv6 bracket, a port out of range or not a number
            raise ValueError(f"is not a valid URL: {err}") from None
        if not parts.hostname:
            raise ValueError("has no host (expected http(s)://host[:port]/path)")
        if port == 0:
            raise ValueError("has port 0 (expected 1-65535)")
        return v.rstrip("/")

    @field_validator("model")
    @classmethod
    def _named_model(cls, v: str) -> str:
        # every request names it; an empty one is a 400 from the server after the run has started
        if not v.strip():
            raise ValueError("must not be empty (the model name the server serves)")
        return v

    @field_validator("headers", "headers_env", "query")
    @classmethod
    def _one_line_values(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if any(c in f"{key}{value}" for c in "\r\n"):
                raise ValueError(f"'{key}' must not contain a line break")
        return v

    def resolved_headers(self) -> dict[str, str]:
        """``headers`` plus each ``headers_env`` header whose variable is set."""
        out = dict(self.headers)
        for header, env in self.headers_env.items():
            value = os.environ.get(env)
            if value is not None:
                out[header] = value
        return out

    def secret_env_names(self) -> list[str]:
        """The environment variables whose values are secrets (scrubbed from every output)."""
        return [n for n in [self.api_key_env, *self.headers_env.values()] if n]

    def env_value_problem(self) -> str | None:
        """One line naming the first secret variable whose value no HTTP header can carry, else None.

        A key saved with its newline (``echo $KEY > file`` into a Kubernetes Secret) passed
        until the HTTP library refused the first request's header: exit 3, as if the target
        were at fault, after the run folder was made. It is bad input, found before any
        request. The line names the variable and the character, never the value.
        """
        named = [(self.api_key_env, "target.api_key_env")] if self.api_key_env else []
        named += [(env, f"target.headers_env.{header}") for header, env in self.headers_env.items()]
        for env, where in named:
            bad = _control_character(os.environ.get(env) or "")
            if bad:
                return (f"${env} ({where}) holds a control character ({bad}), which an HTTP header cannot carry; "
                        "set the variable without it (the value is not shown)")
        return None

    def missing_env(self) -> list[str]:
        """Secret variables the scenario names that are not set."""
        return [n for n in self.secret_env_names() if n not in os.environ]
