"""``workload.tools``, ``tool_choice`` and ``response_format``: requests that ask for structure.

The fields follow OpenAI's chat API (vLLM, SGLang and llama-server take the
same), so a definition copied from an application works as is. Each schema is
checked as a JSON Schema when the scenario loads, so a typo is one line naming
its YAML path, not a run of requests the server rejects.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from loadtest.client.output_check import schema_problem
from loadtest.scenario._base import _Strict

#: OpenAI's rule for function names.
_NAME = r"^[A-Za-z0-9_-]{1,64}$"


class ToolFunction(_Strict):
    name: str = Field(pattern=_NAME)
    description: str | None = None
    #: The arguments' JSON Schema (the answer's arguments are validated against it).
    parameters: dict[str, Any] | None = None
    strict: bool | None = None

    @field_validator("parameters")
    @classmethod
    def _schema(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        problem = schema_problem(v) if v is not None else None
        if problem:
            raise ValueError(problem)
        return v


class Tool(_Strict):
    """One OpenAI tool definition: ``{type: function, function: {name, description, parameters}}``."""

    type: Literal["function"] = "function"
    function: ToolFunction


class _NamedFunction(_Strict):
    name: str = Field(pattern=_NAME)


class NamedToolChoice(_Strict):
    """``tool_choice: {type: function, function: {name: ...}}``: the call must be this one."""

    type: Literal["function"] = "function"
    function: _NamedFunction


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class JsonSchemaFormat(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(default="output", pattern=_NAME)
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None
    description: str | None = None

    @field_validator("schema_")
    @classmethod
    def _schema(cls, v: dict[str, Any]) -> dict[str, Any]:
        problem = schema_problem(v)
        if problem:
            raise ValueError(problem)
        return v


class ResponseFormat(_Strict):
    """``{type: json_schema, json_schema: {name, schema, strict}}``, ``{type: json_object}`` or ``{type: text}``."""

    type: Literal["json_schema", "json_object", "text"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_goes_with_type(self) -> "ResponseFormat":
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("type json_schema needs a json_schema: {name, schema}")
        if self.type != "json_schema" and self.json_schema is not None:
            raise ValueError(f"json_schema goes with type json_schema, not {self.type}")
        return self


def body_fields(tools: list[Tool] | None, tool_choice: Any, response_format: ResponseFormat | None) -> dict[str, Any]:
    """The request-body fields these settings add (as OpenAI spells them)."""
    out: dict[str, Any] = {}
    if tools:
        out["tools"] = [t.model_dump(exclude_none=True, by_alias=True) for t in tools]
        if tool_choice is not None:
            out["tool_choice"] = tool_choice if isinstance(tool_choice, str) else tool_choice.model_dump()
    if response_format is not None:
        out["response_format"] = response_format.model_dump(exclude_none=True, by_alias=True)
    return out
