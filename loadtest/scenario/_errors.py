"""Pydantic's validation errors as one line that names the YAML path of the bad field.

``load.levels[2]: must be a positive integer``: the person reading it is
editing a YAML file, not a Python model.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import ValidationError

from loadtest.analysis.slo import SloError
from loadtest.scenario._base import _Strict


_MESSAGES = {
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "extra_forbidden": "unknown key",
    "missing": "is required",
    "bool_parsing": "must be true or false",
    "literal_error": "must be one of {expected}",
    "finite_number": "must be a finite number",
}


#: A message that starts with the YAML path it is about (``slo.ttft_ms: ...``).
_NAMES_ITS_PATH = re.compile(r"^[A-Za-z_][\w.\[\]]*: ")


#: The type names pydantic puts in an error's location for a member of a union
#: (``int | TokenDistribution``): not YAML keys.
_TYPE_TAGS = {"int", "float", "str", "bool", "none", "dict", "list"}


def _is_union_tag(part: Any) -> bool:
    if not isinstance(part, str):
        return False
    return (part.startswith(("function-", "constrained-")) or "[" in part or part in _TYPE_TAGS
            or part in _model_names())


def _models() -> list[type[_Strict]]:
    """The scenario's model classes (every subclass of the strict base)."""
    out, todo = [], [_Strict]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out


def _model_names() -> set[str]:
    """The scenario's model classes' names, which tag a union member's errors."""
    return {cls.__name__ for cls in _models()}


def _yaml_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _is_union_tag(part):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


_INT_FIELDS = {"levels", "start", "max", "mean", "max_tokens", "warmup_requests", "tokens", "groups", "turns", "max_in_flight", "batch_size", "count", "width", "height"}


def _is_int_field(loc: tuple[Any, ...]) -> bool:
    # a union's branch names (constrained-int, function-...) are not YAML keys
    names = [part for part in loc if isinstance(part, str) and not _is_union_tag(part)]
    return bool(names) and names[-1] in _INT_FIELDS


def _describe(error: dict[str, Any]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in ("greater_than", "greater_than_equal") and ctx.get("gt", ctx.get("ge")) in (0, 0.0):
        noun = "integer" if _is_int_field(error["loc"]) else "number"
        return f"must be a positive {noun}" if kind == "greater_than" else f"must be a non-negative {noun}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be an integer (got {_as_yaml(error.get('input'))})"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number (got {_as_yaml(error.get('input'))})"
    if kind in ("dict_type", "model_type"):
        return "must be a mapping of keys"
    if kind in ("list_type",):
        return "must be a list"
    if kind in ("string_type",):
        return "must be a string"
    if kind == "string_pattern_mismatch":  # said from the pattern itself: names differ in what they allow
        allowed = [w for c, w in ((".", "'.'"), ("_", "'_'"), ("-", "'-'")) if c in str(ctx.get("pattern", ""))]
        return "must be letters, digits" + (", " + ", ".join(allowed[:-1]) + " or " + allowed[-1] if allowed else "")
    if kind in _MESSAGES:
        try:
            return _MESSAGES[kind].format(**ctx)
        except (KeyError, IndexError):
            return _MESSAGES[kind]
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    msg = error["msg"]
    return msg[0].lower() + msg[1:] if msg else kind


#: An error saying the value was of another type: for a union, the branches that did not apply.
_WRONG_TYPE = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "string_type": "a string",
    "bool_type": "true or false", "bool_parsing": "true or false", "list_type": "a list",
    "dict_type": "a mapping of keys", "model_type": "a mapping of keys", "model_attributes_type": "a mapping of keys",
}


def _as_yaml(value: Any) -> str:
    """A value as the YAML that gave it: ``true``, not ``True``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return repr(value)


def _problems(errors: list[dict[str, Any]]) -> list[tuple[int, list[dict[str, Any]]]]:
    """The errors grouped by the YAML field they are about, in order.

    A union (``max_tokens: 64`` or ``{mean, stddev}``) reports one error per
    member, all about the one field: that is one problem, not two.
    """
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for error in errors:
        loc = tuple(error["loc"])
        cut = next((i for i, part in enumerate(loc) if _is_union_tag(part)), len(loc))
        groups.setdefault(loc[:cut], []).append(error)
    return [(len(field), group) for field, group in groups.items()]


def _one_problem(depth: int, group: list[dict[str, Any]]) -> tuple[dict[str, Any], str | None]:
    """The error to show for one field: from the union member whose type matched (its error is
    not a wrong type, or lies deeper than the member itself), or else all the types it may be."""
    matched = [e for e in group if e["type"] not in _WRONG_TYPE or len(e["loc"]) > depth + 1]
    if matched or len(group) == 1:
        return (matched or group)[0], None
    kinds = list(dict.fromkeys(_WRONG_TYPE[e["type"]] for e in group))
    return group[0], must_be_one_of(kinds, group[0].get("input"))


def must_be_one_of(kinds: list[str], value: Any) -> str:
    """``must be an integer or a mapping of keys (got 'lots')``: the words for a value of none of
    the types a field takes, said alike by a union and by a model that also takes another type."""
    return f"must be {' or '.join(kinds)} (got {_as_yaml(value)})"


def _field_names() -> set[str]:
    """Every key the scenario's models know (for "did you mean")."""
    return {info.alias or name for cls in _models() for name, info in cls.model_fields.items()}


def _did_you_mean(error: dict[str, Any], errors: list[dict[str, Any]]) -> str:
    """For an unknown key: the known key it most likely misspells (a missing sibling first), or ''."""
    key = error["loc"][-1] if error["loc"] else None
    if not isinstance(key, str):
        return ""
    parent = tuple(error["loc"][:-1])
    missing = [e["loc"][-1] for e in errors if e["type"] == "missing" and tuple(e["loc"][:-1]) == parent]
    for pool in (missing, sorted(_field_names())):
        match = difflib.get_close_matches(key, [str(k) for k in pool], n=1, cutoff=0.75)
        if match and match[0] != key:
            return f" (did you mean '{match[0]}'?)"
    return ""


def format_validation_error(err: ValidationError) -> str:
    """The first problem, as ``yaml.path: what is wrong`` (one line).

    An unknown key comes first: it is usually the cause of the rest (``loads:`` for ``load:``
    also makes ``load`` missing), and it says which key to fix.
    """
    errors = err.errors(include_url=False)
    problems = _problems(errors)
    problems.sort(key=lambda p: 0 if any(e["type"] == "extra_forbidden" for e in p[1]) else 1)
    first, union_text = _one_problem(*problems[0])
    path = _yaml_path(tuple(first["loc"]))
    more = len(problems) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    slo = (first.get("ctx") or {}).get("error")
    if isinstance(slo, SloError):  # the SLO names the path below its block (slo.itl_ms.p97)
        below = f".{slo.path}" if slo.path else ""
        return f"{path}{below}: {slo.message}{suffix}"
    described = union_text or _describe(first)
    if first["type"] == "extra_forbidden":
        described += _did_you_mean(first, errors)
    if path == "(top level)" and _NAMES_ITS_PATH.match(described):
        return f"{described}{suffix}"  # a whole-scenario check that names the field itself
    return f"{path}: {described}{suffix}"
