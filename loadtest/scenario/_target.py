"""``target:``: where the endpoint is, how to reach it, and what it serves."""

from __future__ import annotations

import os
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, PositiveFloat, field_validator

from loadtest.paths import pem_bundle_problem
from loadtest.scenario._base import _Strict


class ServerMetrics(_Strict):
    """Scraping the target's Prometheus endpoint during the run (``target.metrics``).

    ``target.metrics: false`` turns it off; ``true`` or a mapping turns it on.
    """

    enabled: bool = True
    #: Default: the base URL's origin + ``/metrics`` (where vLLM, SGLang, TGI and llama-server serve it).
    url: str | None = None
    interval_s: PositiveFloat = 1.0
    #: Extra metric names to summarize per level and consider for autoscaling (beyond the known ones).
    signals: list[str] = Field(default_factory=list)

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v


class Target(_Strict):
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "mock-model"
    #: embeddings: not streamed; latency is e2e, throughput input tokens and items per second.
    #: responses: OpenAI's Responses API (/v1/responses), streamed as named events.
    api: Literal["chat", "completions", "embeddings", "responses"] = "chat"
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
    #: The server's own view during the run: false, true, or {url, interval_s, signals}.
    metrics: ServerMetrics = ServerMetrics()
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
        return v.rstrip("/")

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

    def missing_env(self) -> list[str]:
        """Secret variables the scenario names that are not set."""
        return [n for n in self.secret_env_names() if n not in os.environ]
