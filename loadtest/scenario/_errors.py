"""Pydantic's validation errors as one line that names the YAML path of the bad field.

``load.levels[2]: must be a positive integer``: the person reading it is
editing a YAML file, not a Python model.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from loadtest.analysis.slo import SloError


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


#: A message that starts with the YAML path it is about (``slo.ttft_ms: ...``).
_NAMES_ITS_PATH = re.compile(r"^[A-Za-z_][\w.\[\]]*: ")


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


_INT_FIELDS = {"levels", "start", "max", "mean", "max_tokens", "warmup_requests", "tokens", "groups", "turns", "max_in_flight", "batch_size", "count", "width", "height"}


def _is_int_field(loc: tuple[Any, ...]) -> bool:
    # a union's branch names (constrained-int, function-...) are not YAML keys
    names = [part for part in loc if isinstance(part, str) and not part.startswith(("function-", "constrained-"))]
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
    slo = (first.get("ctx") or {}).get("error")
    if isinstance(slo, SloError):  # the SLO names the path below its block (slo.itl_ms.p97)
        below = f".{slo.path}" if slo.path else ""
        return f"{path}{below}: {slo.message}{suffix}"
    described = _describe(first)
    if path == "(top level)" and _NAMES_ITS_PATH.match(described):
        return f"{described}{suffix}"  # a whole-scenario check that names the field itself
    return f"{path}: {described}{suffix}"
