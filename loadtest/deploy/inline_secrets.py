"""Secrets written into a scenario file: where they are, so that ``k8s render`` can refuse them.

``k8s render`` puts the scenario file into a ConfigMap, which anyone who may read the
namespace can read, and which ends up in Git when the manifests are committed. A
``loadtest run`` of the same file keeps these values out of run.json
(:meth:`Scenario.public_dict`), but a manifest cannot redact them: the pods need the
file as written. So render refuses the file instead, naming each value's YAML path
(never the value) and how to read it from a variable kept in a Kubernetes Secret.

What counts as a secret is :mod:`loadtest.redact`'s, the rules run.json is redacted by:
a header or body key whose name is secret (``Authorization``, ``X-Custom-Secret``,
``api_key``, ``session_token``, or a name in ``target.secret_fields``), a URL's userinfo or
a query parameter whose name is secret, and any value with a well-known credential's
shape (``sk-…``, ``Bearer …``, a JWT …). One rule of run.json is left out on purpose: a
query value redacted only for its shape (16+ mixed letters and digits): a scenario's own
value of that shape is rarely a credential (run.json no longer counts Azure's dated
``api-version: 2024-02-15-preview`` as one either), and the stream scrubber does not rewrite
such a value, so it reaches the ConfigMap as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator
from urllib.parse import parse_qsl, urlsplit

from loadtest.redact import looks_secret_field, looks_secret_name, scrub

if TYPE_CHECKING:  # the schema (pydantic) is loaded by the command that renders, not by this module
    from loadtest.scenario import Scenario


def _secret_query_name(name: str, extra: Iterable[str]) -> bool:
    return looks_secret_name(name) or looks_secret_field(name, extra) or name.lower() == "code"


def url_secret_parts(url: str, extra: Iterable[str] = ()) -> list[str]:
    """What in ``url`` is a secret, in words (``its user:password@``, ``query parameter api_key``); never the values."""
    try:
        parts = urlsplit(url)
        userinfo = parts.username is not None or parts.password is not None
    except ValueError:  # not a URL after all: the patterns below still apply
        return ["a credential"] if scrub(url) != url else []
    found = ["its user:password@"] if userinfo else []
    # "query parameter api_key", not "?api_key=…": stderr's scrubber would take the words after it for the value
    found += [f"query parameter {name}" for name, value in parse_qsl(parts.query, keep_blank_values=True)
              if value and _secret_query_name(name, extra)]
    if not found and scrub(url) != url:
        found.append("a credential")
    return found


def _body_paths(body: Any, where: str, extra: tuple[str, ...]) -> Iterator[str]:
    """The YAML path of every secret-named key of a request body, at any depth (as run.json redacts them)."""
    if isinstance(body, dict):
        for key, value in body.items():
            path = f"{where}.{key}"
            if looks_secret_field(str(key), extra) and value is not None:
                yield path
            else:
                yield from _body_paths(value, path, extra)
    elif isinstance(body, (list, tuple)):
        for i, value in enumerate(body):
            yield from _body_paths(value, f"{where}[{i}]", extra)


def _shaped_paths(data: Any, where: str = "") -> Iterator[str]:
    """The YAML path of every string value that has a well-known credential's shape (what stdout would rewrite)."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _shaped_paths(value, f"{where}.{key}" if where else str(key))
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            yield from _shaped_paths(value, f"{where}[{i}]")
    elif isinstance(data, str) and scrub(data) != data:
        yield where


def inline_secret_paths(scenario: Scenario) -> list[str]:
    """The YAML paths of the secret values written in ``scenario``.

    A URL is named with what in it is secret: ``target.base_url (its user:password@, query parameter api_key)``.
    """
    t = scenario.target
    extra = tuple(t.secret_fields)
    found = [f"target.headers.{name}" for name in t.headers
             if looks_secret_name(name) or looks_secret_field(name, extra)]
    urls = [("target.base_url", t.base_url), ("target.metrics.url", t.metrics.url)]
    urls += [(f"target.metrics.urls[{i}]", u) for i, u in enumerate(t.metrics.urls)]
    urls += [("target.metrics.prometheus.url", t.metrics.prometheus.url if t.metrics.prometheus else None)]
    for where, url in urls:
        parts = url_secret_parts(url, extra) if url else []
        if parts:
            found.append(f"{where} ({', '.join(parts)})")
    found += [f"target.query.{name}" for name, value in t.query.items() if value and _secret_query_name(name, extra)]
    found += _body_paths(scenario.workload.extra_body, "workload.extra_body", extra)
    for i, c in enumerate(scenario.workload.classes):
        found += _body_paths(c.extra_body or {}, f"workload.classes[{i}].extra_body", extra)
    named = [p.split(" (")[0] for p in found]
    found += [p for p in _shaped_paths(scenario.model_dump(mode="json"))
              if not any(p == n or p.startswith((f"{n}.", f"{n}[")) for n in named)]  # not again, nor inside one
    return list(dict.fromkeys(found))
