"""A scenario file: YAML in, a validated, typed :class:`Scenario` out.

Validation is pydantic's; what this module adds is the translation of its
errors into one line that names the YAML path of the bad field
(``load.levels[2]: must be a positive integer``), because the person reading it
is editing a YAML file, not a Python model.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from loadtest.errors import InputError
from loadtest.facts import Cost, Hardware, ModelFacts

PERCENTILES = ("p50", "p90", "p95", "p99")
LATENCY_METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")


class _Strict(BaseModel):
    """Unknown keys are mistakes (usually typos), so they are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
    api: Literal["chat", "completions"] = "chat"
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
        from urllib.parse import urlsplit

        if self.metrics.url:
            return self.metrics.url
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.netloc}/metrics"

    @field_validator("ca_bundle")
    @classmethod
    def _bundle_exists(cls, v: str | None) -> str | None:
        from loadtest.paths import pem_bundle_problem

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


class TokenDistribution(_Strict):
    """A normal distribution of token counts, clipped at 1."""

    mean: PositiveInt
    stddev: NonNegativeFloat = 0.0

    def sample(self, rng: "random.Random") -> int:
        return max(1, round(rng.gauss(self.mean, self.stddev))) if self.stddev else self.mean


def typical_tokens(value: "int | TokenDistribution") -> int:
    """A fixed count, or a distribution's mean."""
    return value if isinstance(value, int) else value.mean


class Dataset(_Strict):
    """Prompts from a file instead of synthetic words (see :mod:`loadtest.workload.dataset`)."""

    #: Relative paths are resolved against the scenario file's folder when it is loaded.
    path: str
    format: Literal["jsonl", "sharegpt"] = "jsonl"
    order: Literal["shuffle", "sequential"] = "shuffle"
    #: A ShareGPT answer's length (or a row's ``max_tokens``) becomes that request's max_tokens.
    use_output_lengths: bool = False

    @field_validator("path")
    @classmethod
    def _file_exists(cls, v: str) -> str:
        from loadtest.paths import yaml_file_problem

        problem = yaml_file_problem(v)
        if problem:
            raise ValueError(problem)
        return v


class SharedPrefix(_Strict):
    """A system prompt shared by many requests, so a prefix cache can serve it (on purpose)."""

    tokens: PositiveInt
    #: Distinct prefixes; each request draws one.
    groups: PositiveInt = 1


class Conversation(_Strict):
    """Multi-turn use: each request resends the history, including the answer actually streamed."""

    turns: PositiveInt = 2
    #: Pause between a conversation's turns (closed-loop users only).
    think_time_s: NonNegativeFloat = 0.0


class _WorkloadFields(_Strict):
    """What shapes a request; a class may override any of it."""

    prompt_tokens: TokenDistribution = TokenDistribution(mean=128, stddev=16)
    #: A fixed output length, or a distribution: varied lengths keep closed-loop
    #: users from finishing in lock-step, as real traffic does.
    max_tokens: PositiveInt | TokenDistribution = 64
    ignore_eos: bool = True
    #: ``null`` leaves temperature out of the body (reasoning models reject it).
    temperature: NonNegativeFloat | None = 0.0
    extra_body: dict[str, Any] = Field(default_factory=dict)
    dataset: Dataset | None = None
    shared_prefix: SharedPrefix | None = None
    conversation: Conversation | None = None


class RequestClass(_Strict):
    """One kind of request in a mixed workload, with its own share and SLO.

    Every workload field it leaves out is inherited from ``workload``; without
    its own ``slo`` it is judged by the top-level one.
    """

    #: No dots: ``--slo summarize.e2e_ms.p95=15000`` splits on them.
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
    #: Share of requests (of conversations, in multi-turn use), relative to the other classes.
    weight: PositiveFloat = 1.0
    slo: "Slo | None" = None
    prompt_tokens: TokenDistribution | None = None
    max_tokens: PositiveInt | TokenDistribution | None = None
    ignore_eos: bool | None = None
    temperature: NonNegativeFloat | None = None
    extra_body: dict[str, Any] | None = None
    dataset: Dataset | None = None
    shared_prefix: SharedPrefix | None = None
    conversation: Conversation | None = None

    def overrides(self) -> dict[str, Any]:
        """The workload fields this class sets (the rest are inherited)."""
        return {
            name: getattr(self, name)
            for name in _WorkloadFields.model_fields
            if getattr(self, name) is not None
        }


class Workload(_WorkloadFields):
    #: Fixes the prompt lengths and words, so runs stay comparable.
    seed: int = 0
    #: Each run draws a random salt that goes into every prompt's nonce (and every shared
    #: prefix), so no two requests of any two runs share a prefix (a prefix cache cannot
    #: flatter a second run). ``false`` keeps prompts identical across runs: for measuring
    #: a warm prefix cache on purpose.
    cache_bust: bool = True
    classes: list[RequestClass] = Field(default_factory=list)

    @field_validator("classes")
    @classmethod
    def _unique_names(cls, v: list[RequestClass]) -> list[RequestClass]:
        seen: set[str] = set()
        for c in v:
            if c.name in seen:
                raise ValueError(f"class name '{c.name}' is used twice")
            seen.add(c.name)
        return v

    def for_class(self, request_class: RequestClass | None) -> "Workload":
        """The workload one class draws from: this one with the class's overrides, no classes."""
        if request_class is None:
            return self.model_copy(update={"classes": []})
        return self.model_copy(update={**request_class.overrides(), "classes": []})


class ClientLimits(_Strict):
    """When the load generator itself is too busy to be trusted.

    A level is judged by whether the client's own measured timing error could
    move a verdict (load/monitor.py, analysis/client_error.py); above ``cpu_pct``
    of a core it is flagged whatever its verdicts. The two others are optional
    hard limits (off by default): a level past one is flagged too.
    """

    loop_lag_p99_ms: PositiveFloat | None = None
    reader_batch_p99_ms: PositiveFloat | None = None
    cpu_pct: PositiveFloat = 80.0


class Load(_Strict):
    levels: list[PositiveInt] | None = None
    start: PositiveInt | None = None
    step: PositiveFloat | None = None
    max: PositiveInt | None = None
    step_mode: Literal["multiply", "add"] = "multiply"
    #: Open loop (load/open_loop.py): requests per second per level, or rate_start/rate_step/rate_max.
    rates: list[PositiveFloat] | None = None
    rate_start: PositiveFloat | None = None
    rate_step: PositiveFloat | None = None
    rate_max: PositiveFloat | None = None
    #: How the send times of an open-loop level are drawn (load/arrivals.py).
    arrival: Literal["poisson", "constant", "gamma"] = "poisson"
    #: Gamma arrivals' shape: 1 is Poisson, below 1 burstier, above 1 more regular.
    burstiness: PositiveFloat | None = None
    #: Open loop: at most this many requests in flight; arrivals beyond it fail as ``dropped``.
    max_in_flight: PositiveInt = 512
    #: Seeds the open-loop arrival streams (each level and worker draws its own).
    arrival_seed: int = 0
    level_duration_s: PositiveFloat = 30.0
    warmup_s: NonNegativeFloat = 5.0
    warmup_requests: NonNegativeInt = 5
    #: A level whose verdict is decided this long after it started ends early
    #: (default: half of its measured window, i.e. warmup + (duration − warmup) / 2).
    min_level_duration_s: PositiveFloat | None = None
    #: An undecided level runs on until it is decided or this long (default 4 × level_duration_s).
    max_level_duration_s: PositiveFloat | None = None
    client_limits: ClientLimits = ClientLimits()

    @model_validator(mode="after")
    def _one_way_to_give_levels(self) -> "Load":
        ranged = [k for k in ("start", "step", "max") if getattr(self, k) is not None]
        rate_ranged = [k for k in ("rate_start", "rate_step", "rate_max") if getattr(self, k) is not None]
        closed = self.levels is not None or bool(ranged)
        if self.levels is not None and ranged:
            raise ValueError(f"give either 'levels' or 'start/step/max', not both (found levels and {', '.join(ranged)})")
        if closed and (self.rates is not None or rate_ranged):
            given = ", ".join((["levels"] if self.levels is not None else []) + ranged)
            rates = ", ".join((["rates"] if self.rates is not None else []) + rate_ranged)
            raise ValueError(
                f"give either 'levels' (closed loop) or 'rates' (open loop), not both (found {given} and {rates})"
            )
        if self.burstiness is not None and self.arrival != "gamma":
            raise ValueError(f"'burstiness' applies to 'arrival: gamma' only (arrival is {self.arrival})")
        if not closed:
            self._check_rates(rate_ranged)
        elif self.levels is None and not ranged:
            raise ValueError("give the concurrency levels: 'levels: [1, 2, 4]' or 'start', 'step' and 'max'")
        if ranged and len(ranged) != 3:
            missing = sorted({"start", "step", "max"} - set(ranged))
            raise ValueError(f"'start/step/max' needs all three; missing {', '.join(missing)}")
        if self.levels is not None and not self.levels:
            raise ValueError("'levels' must not be empty")
        if self.warmup_s >= self.level_duration_s:
            raise ValueError(f"'warmup_s' ({self.warmup_s:g}) must be shorter than 'level_duration_s' ({self.level_duration_s:g})")
        lo, hi = self.min_duration_s, self.max_duration_s
        if lo <= self.warmup_s:
            raise ValueError(f"'min_level_duration_s' ({lo:g}) must be longer than 'warmup_s' ({self.warmup_s:g})")
        if lo > self.level_duration_s:
            raise ValueError(f"'min_level_duration_s' ({lo:g}) must not exceed 'level_duration_s' ({self.level_duration_s:g})")
        if hi < self.level_duration_s:
            raise ValueError(f"'max_level_duration_s' ({hi:g}) must be at least 'level_duration_s' ({self.level_duration_s:g})")
        if ranged and self.start > self.max:
            raise ValueError(f"'start' ({self.start}) must not exceed 'max' ({self.max})")
        if ranged and self.step_mode == "multiply" and self.step <= 1:
            raise ValueError("'step' must be greater than 1 when step_mode is multiply")
        return self

    def _check_rates(self, rate_ranged: list[str]) -> None:
        if self.rates is None and not rate_ranged:
            raise ValueError(
                "give the load: concurrency 'levels: [1, 2, 4]' (or start/step/max), "
                "or open-loop 'rates: [1, 2, 4]' (or rate_start/rate_step/rate_max)"
            )
        if self.rates is not None and rate_ranged:
            raise ValueError(f"give either 'rates' or 'rate_start/rate_step/rate_max', not both (found rates and {', '.join(rate_ranged)})")
        if rate_ranged and len(rate_ranged) != 3:
            missing = sorted({"rate_start", "rate_step", "rate_max"} - set(rate_ranged))
            raise ValueError(f"'rate_start/rate_step/rate_max' needs all three; missing {', '.join(missing)}")
        if self.rates is not None and not self.rates:
            raise ValueError("'rates' must not be empty")
        if rate_ranged and self.rate_start > self.rate_max:
            raise ValueError(f"'rate_start' ({self.rate_start:g}) must not exceed 'rate_max' ({self.rate_max:g})")
        if rate_ranged and self.step_mode == "multiply" and self.rate_step <= 1:
            raise ValueError("'rate_step' must be greater than 1 when step_mode is multiply")

    @property
    def open_loop(self) -> bool:
        """Rates (requests per second) rather than concurrency levels."""
        return self.rates is not None or self.rate_start is not None

    def rate_levels(self) -> list[float]:
        """The open-loop rates in run order: as given, or generated from rate_start/rate_step/rate_max."""
        if self.rates is not None:
            return [float(r) for r in self.rates]
        if self.rate_start is None:
            return []
        out: list[float] = []
        value = float(self.rate_start)
        while value <= self.rate_max * (1 + 1e-9):
            out.append(round(value, 6))
            value = value * self.rate_step if self.step_mode == "multiply" else value + self.rate_step
        return out

    @property
    def min_duration_s(self) -> float:
        """When a decided level may end (see ``min_level_duration_s``)."""
        if self.min_level_duration_s is not None:
            return self.min_level_duration_s
        return self.warmup_s + (self.level_duration_s - self.warmup_s) / 2

    @property
    def max_duration_s(self) -> float:
        """How long an undecided level may run (see ``max_level_duration_s``)."""
        return self.max_level_duration_s if self.max_level_duration_s is not None else 4 * self.level_duration_s

    def concurrency_levels(self) -> list[int]:
        """The levels in run order: as given, or generated from start/step/max (empty in open loop)."""
        if self.levels is not None:
            return list(self.levels)
        if self.start is None:
            return []
        out: list[int] = []
        value = float(self.start)
        while round(value) <= self.max:
            level = int(round(value))
            if not out or level > out[-1]:
                out.append(level)
            value = value * self.step if self.step_mode == "multiply" else value + self.step
        return out


class Slo(_Strict):
    """Latency limits by percentile, plus the error budget."""

    ttft_ms: dict[str, PositiveFloat] = Field(default_factory=dict)
    itl_ms: dict[str, PositiveFloat] = Field(default_factory=dict)
    tpot_ms: dict[str, PositiveFloat] = Field(default_factory=dict)
    e2e_ms: dict[str, PositiveFloat] = Field(default_factory=dict)
    max_error_rate: float = Field(default=0.01, ge=0.0, le=1.0)

    @field_validator("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
    @classmethod
    def _known_percentiles(cls, v: dict[str, float]) -> dict[str, float]:
        for key in v:
            if key not in PERCENTILES:
                raise ValueError(f"unknown percentile '{key}' (use one of {', '.join(PERCENTILES)})")
        return v


class Scenario(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    target: Target = Target()
    workload: Workload = Workload()
    load: Load
    slo: Slo = Slo()
    #: Optional facts for the roofline and the cost (loadtest/facts.py); analysis only.
    hardware: Hardware | None = None
    model: ModelFacts | None = None
    cost: Cost | None = None

    @model_validator(mode="after")
    def _classes_inherit_the_error_budget(self) -> "Scenario":
        """A class SLO that names no ``max_error_rate`` keeps the top-level budget, not the default."""
        classes = []
        for c in self.workload.classes:
            if c.slo is not None and "max_error_rate" not in c.slo.model_fields_set:
                slo = c.slo.model_copy(update={"max_error_rate": self.slo.max_error_rate})
                c = c.model_copy(update={"slo": slo})
            classes.append(c)
        object.__setattr__(self, "workload", self.workload.model_copy(update={"classes": classes}))
        return self

    def with_overrides(
        self,
        *,
        target: str | None = None,
        model: str | None = None,
        levels: list[int] | None = None,
        rates: list[float] | None = None,
        level_duration_s: float | None = None,
        server_metrics: bool | None = None,
    ) -> "Scenario":
        """Apply command-line overrides, re-validating the result."""
        data = self.model_dump()
        if target is not None:
            data["target"]["base_url"] = target
        if model is not None:
            data["target"]["model"] = model
        if levels is not None:
            data["load"].update(levels=levels, start=None, step=None, max=None, rates=None,
                                rate_start=None, rate_step=None, rate_max=None)
        if rates is not None:
            data["load"].update(rates=rates, rate_start=None, rate_step=None, rate_max=None,
                                levels=None, start=None, step=None, max=None)
        if level_duration_s is not None:
            data["load"]["level_duration_s"] = level_duration_s
        if server_metrics is not None:
            data["target"]["metrics"]["enabled"] = server_metrics
        return parse_scenario(data, source="command line")

    def public_dict(self) -> dict[str, Any]:
        """The scenario as written to run.json: never holds a secret (only env var names).

        Headers whose names look secret, URL userinfo and token-like query values
        are replaced; :mod:`loadtest.redact` scrubs the values themselves too.
        """
        from loadtest.redact import REDACTED, looks_secret_field, looks_secret_name, public_url, query_secrets, redact_body

        data = self.model_dump(mode="json")
        target = data["target"]
        extra = target["secret_fields"]
        target["headers"] = {k: (REDACTED if looks_secret_name(k) or looks_secret_field(k, extra) else v)
                             for k, v in target["headers"].items()}
        target["base_url"] = public_url(target["base_url"])
        secret = set(query_secrets(target["query"], extra))
        target["query"] = {k: (REDACTED if v in secret else v) for k, v in target["query"].items()}
        workload = data["workload"]
        workload["extra_body"] = redact_body(workload["extra_body"], extra)
        for c in workload.get("classes") or []:
            if c.get("extra_body") is not None:
                c["extra_body"] = redact_body(c["extra_body"], extra)
        return data

    def request_bodies(self) -> list[dict[str, Any]]:
        """The ``extra_body`` mappings (the workload's and each class's): where body secrets live."""
        return [self.workload.extra_body] + [c.extra_body for c in self.workload.classes if c.extra_body]


RequestClass.model_rebuild()
Workload.model_rebuild()
Scenario.model_rebuild()


_MESSAGES = {
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "extra_forbidden": "unknown key",
    "missing": "is required",
    "bool_parsing": "must be true or false",
    "literal_error": "must be one of {expected}",
    "string_pattern_mismatch": "must be letters, digits, '.', '_' or '-'",
}


def _yaml_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.startswith(("function-", "constrained-")):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


_INT_FIELDS = {"levels", "start", "max", "mean", "max_tokens", "warmup_requests", "tokens", "groups", "turns", "max_in_flight"}


def _is_int_field(loc: tuple[Any, ...]) -> bool:
    names = [part for part in loc if isinstance(part, str)]
    return bool(names) and names[-1] in _INT_FIELDS


def _describe(error: dict[str, Any]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in ("greater_than", "greater_than_equal") and ctx.get("gt", ctx.get("ge")) in (0, 0.0):
        noun = "integer" if _is_int_field(error["loc"]) else "number"
        return f"must be a positive {noun}" if kind == "greater_than" else f"must be a non-negative {noun}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be an integer (got {error.get('input')!r})"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number (got {error.get('input')!r})"
    if kind in ("dict_type", "model_type"):
        return "must be a mapping of keys"
    if kind in ("list_type",):
        return "must be a list"
    if kind in ("string_type",):
        return "must be a string"
    if kind in _MESSAGES:
        try:
            return _MESSAGES[kind].format(**ctx)
        except (KeyError, IndexError):
            return _MESSAGES[kind]
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    msg = error["msg"]
    return msg[0].lower() + msg[1:] if msg else kind


def format_validation_error(err: ValidationError) -> str:
    """The first problem, as ``yaml.path: what is wrong`` (one line)."""
    first = err.errors(include_url=False)[0]
    path = _yaml_path(tuple(first["loc"]))
    more = len(err.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{path}: {_describe(first)}{suffix}"


def parse_scenario(data: Any, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise InputError(f"{source}: the top level must be a mapping of keys (name, target, workload, load, slo)")
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise InputError(f"{source}: {format_validation_error(err)}") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; every problem is one :class:`InputError` line."""
    from loadtest.paths import read_text

    path = Path(path)
    text = read_text(path, "scenario", kind="scenario file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise InputError(f"{path}: {problem}{where}") from None
    _resolve_dataset_paths(data, path.parent)
    return parse_scenario(data, source=str(path))


def _resolve_dataset_paths(data: Any, folder: Path) -> None:
    """Make every ``dataset.path`` absolute, relative to the scenario file's folder.

    Done on the raw YAML, before validation, so the check that the file exists
    and the run.json copy both see the path that is actually read (workers get
    the scenario from a temporary file elsewhere).
    """
    workload = data.get("workload") if isinstance(data, dict) else None
    if not isinstance(workload, dict):
        return
    holders = [workload] + [c for c in workload.get("classes") or [] if isinstance(c, dict)]
    for holder in holders:
        dataset = holder.get("dataset")
        if isinstance(dataset, dict) and isinstance(dataset.get("path"), str):
            p = Path(dataset["path"]).expanduser()
            # abspath, not resolve(): a symlink is named as written, so its mistakes are too
            dataset["path"] = str(p if p.is_absolute() else Path(os.path.abspath(folder / p)))


