"""``workload:``: what a request looks like (lengths, datasets, prefixes, conversations, classes)."""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from loadtest.paths import yaml_file_problem
from loadtest.scenario._errors import must_be_one_of
from loadtest.scenario._base import Int, NonNegativeFloat, PositiveFloat, PositiveInt, _Strict
from loadtest.scenario._structured import ResponseFormat, Tool, ToolChoice
from loadtest.analysis.slo import SloSpec


def _existing_file(path: str) -> str:
    """A ``path`` field's check: the file is there (the error names it; pydantic prefixes the YAML path)."""
    problem = yaml_file_problem(path)
    if problem:
        raise ValueError(problem)
    return path


class TokenDistribution(_Strict):
    """A normal distribution of token counts, clipped at 1.

    A plain number is the distribution without spread (``prompt_tokens: 1000`` is
    ``{mean: 1000, stddev: 0}``), as ``max_tokens: 64`` already is a fixed length: a
    length is a number first, and asking for a mapping to say it was a trap.
    """

    mean: PositiveInt
    stddev: NonNegativeFloat = 0.0

    @model_validator(mode="before")
    @classmethod
    def _a_number_is_a_fixed_length(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            if data < 1:  # named at the field the user wrote, not at a ``mean`` they did not
                raise ValueError("must be a positive integer (a fixed length) or {mean, stddev}")
            return {"mean": data, "stddev": 0}
        if not isinstance(data, (dict, TokenDistribution)):
            # pydantic's own error would say "a mapping of keys" only, without the value:
            # the words of a union field (``max_tokens: PositiveInt | TokenDistribution``) instead
            raise ValueError(must_be_one_of(["an integer", "a mapping of keys"], data))
        return data

    def sample(self, rng: "random.Random") -> int:
        return max(1, round(rng.gauss(self.mean, self.stddev))) if self.stddev else self.mean


def typical_tokens(value: "int | TokenDistribution") -> int:
    """A fixed count, or a distribution's mean."""
    return value if isinstance(value, int) else value.mean


class Images(_Strict):
    """``workload.images``: generated images sent with each chat request (as data URIs)."""

    #: Images per request, and each one's size in pixels: a number or {mean, stddev}.
    count: PositiveInt | TokenDistribution = 1
    width: PositiveInt | TokenDistribution = 512
    height: PositiveInt | TokenDistribution = 512
    format: Literal["png", "jpeg", "webp"] = "png"
    #: Seeded content unique to every request (false: one image per size, shared by all:
    #: a server's image cache may then serve it, on purpose).
    unique: bool = True


class Dataset(_Strict):
    """Prompts from a file instead of synthetic words (see :mod:`loadtest.workload.dataset`)."""

    #: Relative paths are resolved against the scenario file's folder when it is loaded.
    path: str
    format: Literal["jsonl", "sharegpt"] = "jsonl"
    order: Literal["shuffle", "sequential"] = "shuffle"
    #: A ShareGPT answer's length (or a row's ``max_tokens``) becomes that request's max_tokens.
    use_output_lengths: bool = False
    #: A row's image files: ``data_uri`` (sent inline) or ``served`` (URLs of an image server the run
    #: starts on 127.0.0.1; the target must run on the same host). URLs in a row are sent as they are.
    images_as: Literal["data_uri", "served"] = "data_uri"

    _file_exists = field_validator("path")(classmethod(lambda cls, v: _existing_file(v)))


class SharedPrefix(_Strict):
    """A system prompt shared by many requests, so a prefix cache can serve it (on purpose)."""

    tokens: PositiveInt
    #: Distinct prefixes; each request draws one.
    groups: PositiveInt = 1


class TraceWindow(_Strict):
    """The span of a trace that is replayed: seconds from the file's first row (its earliest with ``sort``)."""

    start_s: NonNegativeFloat = 0.0
    #: None: to the end of the file (or to ``max_requests``).
    duration_s: PositiveFloat | None = None


class Trace(_Strict):
    """Requests from a production trace (see :mod:`loadtest.workload.trace`), replayed at ``load.speedups``."""

    path: str
    format: Literal["mooncake", "azure", "burstgpt"]
    window: TraceWindow = TraceWindow()
    max_requests: PositiveInt | None = None
    #: Tokens per Mooncake ``hash_ids`` block (Mooncake's own traces use 512).
    block_tokens: PositiveInt = 512
    #: Timestamps that go backwards are an error; ``true`` sorts the window instead.
    sort: bool = False

    _file_exists = field_validator("path")(classmethod(lambda cls, v: _existing_file(v)))


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
    #: OpenAI tool definitions sent with every request (the answer's calls are validated against them).
    tools: list[Tool] | None = None
    #: none | auto | required | {type: function, function: {name}} (sent only with ``tools``).
    tool_choice: ToolChoice | None = None
    #: {type: json_schema, json_schema: {name, schema}} | {type: json_object}: structured output, validated.
    response_format: ResponseFormat | None = None
    #: Inputs per request with ``target.api: embeddings`` (each of ``prompt_tokens``); with
    #: ``rerank`` the documents per query, with ``score`` the pairs (text_2's texts per text_1).
    batch_size: PositiveInt = 1
    #: rerank / score: the query's (text_1's) length; None: drawn like a document (``prompt_tokens``).
    query_tokens: TokenDistribution | None = None
    #: Generated images in each chat request (image_url content parts with data URIs).
    images: Images | None = None


class RequestClass(_Strict):
    """One kind of request in a mixed workload, with its own share and SLO.

    Every workload field it leaves out is inherited from ``workload``; without
    its own ``slo`` it is judged by the top-level one.
    """

    #: No dots: ``--slo summarize.e2e_ms.p95=15000`` splits on them.
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
    #: Share of requests (of conversations, in multi-turn use), relative to the other classes.
    weight: PositiveFloat = 1.0
    slo: SloSpec | None = None
    prompt_tokens: TokenDistribution | None = None
    max_tokens: PositiveInt | TokenDistribution | None = None
    ignore_eos: bool | None = None
    temperature: NonNegativeFloat | None = None
    extra_body: dict[str, Any] | None = None
    dataset: Dataset | None = None
    shared_prefix: SharedPrefix | None = None
    conversation: Conversation | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    batch_size: PositiveInt | None = None
    query_tokens: TokenDistribution | None = None
    images: Images | None = None
    #: The model this class's requests name instead of ``target.model`` (a LoRA adapter's name,
    #: as vLLM's ``--lora-modules`` gives it, or another model the endpoint serves).
    model: str | None = Field(default=None, min_length=1)

    def overrides(self) -> dict[str, Any]:
        """The workload fields this class sets (the rest are inherited)."""
        return {
            name: getattr(self, name)
            for name in _WorkloadFields.model_fields
            if getattr(self, name) is not None
        }


class Workload(_WorkloadFields):
    #: Fixes the prompt lengths and words, so runs stay comparable.
    seed: Int = 0
    #: Each run draws a random salt that goes into every prompt's nonce (and every shared
    #: prefix), so no two requests of any two runs share a prefix (a prefix cache cannot
    #: flatter a second run). ``false`` keeps prompts identical across runs: for measuring
    #: a warm prefix cache on purpose.
    cache_bust: bool = True
    #: Replay a trace's arrivals and lengths (needs ``load.speedups``; no classes or datasets then).
    trace: Trace | None = None
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
