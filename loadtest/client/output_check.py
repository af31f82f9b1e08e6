"""Is a streamed answer valid structured output? The test behind ``levels[].valid_output_rate``.

A server that asks for tool calls or a JSON schema and gets broken JSON back
has not served the request, however fast it streamed it: a load test must not
rank a server that gets faster by emitting broken JSON above one that does not.
So every request whose body asked for structure (``workload.tools`` or
``workload.response_format``) carries an :class:`OutputCheck`, and its
streamed answer is judged once it ended:

- **tool calls**: each call's ``arguments`` must parse as JSON and validate
  against that tool's ``parameters`` schema (``jsonschema``), and must name a
  tool the request offered; ``tool_choice: required`` (or a named function)
  also needs at least one call (of that function). With ``auto`` a plain text
  answer is valid: the model chose not to call;
- **json_schema**: the text must parse and validate against the schema;
- **json_object**: the text must parse as a JSON object.

Schemas are compiled once per class (at workload start), so a check costs a
JSON parse and a validation per request, never a schema compile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a usable JSON Schema (one line), or None."""
    if not isinstance(schema, Mapping):
        return "must be a JSON Schema (a mapping)"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as err:
        where = "/".join(str(p) for p in err.path)
        return f"is not a valid JSON Schema: {err.message}" + (f" (at {where})" if where else "")
    return None


@dataclass(frozen=True)
class ToolCall:
    """One streamed tool call, its pieces joined."""

    name: str
    arguments: str


@dataclass(frozen=True)
class OutputCheck:
    """What a request's answer must be; built from the workload's tools / response_format."""

    #: tool name -> validator of its ``parameters`` (None: any JSON object)
    tools: Mapping[str, Any] = field(default_factory=dict)
    #: "none" | "auto" | "required" | a function name the call must name
    tool_choice: str = "auto"
    #: "json_schema" | "json_object" | None (free text)
    response_format: str | None = None
    schema: Any = None  # the compiled validator of a json_schema response_format

    def valid(self, text: str, calls: Sequence[ToolCall]) -> bool:
        """True when the answer is what the request asked for (see the module doc)."""
        if calls:
            return self.tools != {} and self.tool_choice != "none" and all(self._call_valid(c) for c in calls) and self._named_ok(calls)
        if self.tools and self.tool_choice not in ("auto", "none"):
            return False  # a call was required and none came
        if self.response_format is None:
            return True  # free text (tools offered, the model answered in words)
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            return False
        if self.response_format == "json_object":
            return isinstance(doc, dict)
        return self.schema is None or self.schema.is_valid(doc)

    def _named_ok(self, calls: Sequence[ToolCall]) -> bool:
        if self.tool_choice in ("auto", "required", "none"):
            return True
        return any(c.name == self.tool_choice for c in calls)

    def _call_valid(self, call: ToolCall) -> bool:
        if call.name not in self.tools:
            return False
        try:
            args = orjson.loads(call.arguments) if call.arguments.strip() else {}
        except orjson.JSONDecodeError:
            return False
        if not isinstance(args, dict):
            return False
        validator = self.tools[call.name]
        return validator is None or validator.is_valid(args)


def output_check(
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: Any,
    response_format: Mapping[str, Any] | None,
) -> OutputCheck | None:
    """The check for a class's workload (None when it asks for no structure)."""
    if not tools and not response_format:
        return None
    compiled: dict[str, Any] = {}
    for tool in tools or ():
        fn = tool.get("function") or {}
        params = fn.get("parameters")
        compiled[str(fn.get("name"))] = Draft202012Validator(params) if isinstance(params, Mapping) else None
    kind = response_format.get("type") if response_format else None
    schema = None
    if kind == "json_schema":
        inner = (response_format.get("json_schema") or {}).get("schema")
        schema = Draft202012Validator(inner) if isinstance(inner, Mapping) else None
    return OutputCheck(
        tools=compiled,
        tool_choice=choice_name(tool_choice),
        response_format=kind if kind in ("json_schema", "json_object") else None,
        schema=schema,
    )


def choice_name(tool_choice: Any) -> str:
    """``tool_choice`` as one word: none/auto/required, or the function it names."""
    if tool_choice is None:
        return "auto"
    if isinstance(tool_choice, str):
        return tool_choice
    if isinstance(tool_choice, Mapping):
        return str((tool_choice.get("function") or {}).get("name") or "required")
    return "auto"


def judge(check: OutputCheck | None, rec: Any) -> None:
    """Set ``rec.output_valid`` from its captured answer (left None when unchecked or failed)."""
    if check is None or not rec.ok:
        return
    calls = [ToolCall(parts[0], "".join(parts[1:])) for _, parts in sorted((rec.tool_calls or {}).items())]
    rec.output_valid = check.valid(rec.answer, calls)
