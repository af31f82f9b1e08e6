"""Secrets never written: scrub secret *values* from everything a run writes or prints.

Matching header names is not enough (a key echoed in a server's error body, a
signature in a URL, a proxy password in a traceback would all slip through), so
the process keeps one :class:`Scrubber` that knows

- the literal secrets of this run: the values of ``target.api_key_env`` and
  ``target.headers_env``, of headers whose names look secret, the user and
  password of a URL's userinfo, and query values that look like tokens (by
  name: ``sig``, ``token``, ``key`` …; or by shape: long mixed letters and digits);
- patterns of well-known credentials: ``sk-…`` keys, ``Bearer …``, JWTs,
  ``hf_…``, AWS access key ids, Google API keys, URL userinfo and secret query
  parameters anywhere in a text.

Every writer passes its text through :func:`scrub`: the record's error message
(so the Parquet ``error`` column), ``run.json``, ``summary.json``,
``report.html``, the log files (a logging formatter) and the process's stdout
and stderr (a stream wrapper, so tracebacks and Locust's own prints too).
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
from typing import Any, Iterable, TextIO
from urllib.parse import parse_qsl, unquote, unquote_plus, urlsplit, urlunsplit

REDACTED = "<redacted>"

_SECRET_NAME = re.compile(
    r"auth|key|token|secret|cookie|passw|pwd|credential|signature|(?:^|[-_])sig(?:$|[-_])|bearer|session|sas", re.I
)
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"), REDACTED),                       # OpenAI, Anthropic-style keys
    # After an Authorization header's name, whatever the value looks like ("Bearer changemeplease" is a
    # credential there)...
    (re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic))\s+[A-Za-z0-9._~+/=\-]{8,}"),
     r"\1 " + REDACTED),
    # ... elsewhere, a digit, a base64 symbol, an underscore or a lower-then-upper letter in the value, or
    # capitals only: a credential has one, an English word has none ("a basic scenario" was printed
    # "a basic <redacted>", and k8s render's ConfigMap with it).
    (re.compile(r"\b((?i:bearer|basic))\s+(?=[A-Za-z0-9._~+/=\-]*?(?:[0-9+/=~_]|[a-z][A-Z])|[A-Z]{8,}\b)"
                r"[A-Za-z0-9._~+/=\-]{8,}"),
     r"\1 " + REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]{6,}"), REDACTED),  # JWT
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), REDACTED),                          # Hugging Face
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),                           # AWS access key id
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), REDACTED),                     # Google API key
    (re.compile(r"(\b[a-z][a-z0-9+.\-]*://)[^/\s:@\"'<>]+:[^/\s@\"'<>]+@"), r"\1" + REDACTED + "@"),  # userinfo
    (re.compile(r"(?i)([?&](?:[a-z0-9_\-]*(?:key|token|secret|passw|pwd|credential|signature)[a-z0-9_\-]*|sig|code)=)"
                r"[^&\s\"'<>#]+"), r"\1" + REDACTED),
]
#: A query value this long, of letters and digits mixed, is a token whatever its name.
_TOKEN_SHAPE = re.compile(r"^(?=.*[A-Za-z])(?=.*\d)[A-Za-z0-9+/=_.~%\-]{16,}$")
#: ... except a dated version (Azure's ``api-version=2024-10-01-preview``): run.json said ``<redacted>``
#: where the API version a run spoke belongs, and every print of the URL lost it too.
_DATED_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}(?:-[A-Za-z]+(?:\.\d+)?)?$")


def looks_secret_name(name: str) -> bool:
    """A header or query-parameter name whose value is a credential."""
    return bool(_SECRET_NAME.search(name))


def looks_like_token(value: str) -> bool:
    return bool(_TOKEN_SHAPE.match(value)) and not _DATED_VERSION.match(value)


class Scrubber:
    """Replace known secret values, then well-known credential patterns, with ``<redacted>``."""

    def __init__(self, literals: Iterable[str] = ()) -> None:
        self._literals: set[str] = set()
        self._literal_re: re.Pattern[str] | None = None
        self.add(*literals)

    def add(self, *values: str | None) -> None:
        # Very short values would redact ordinary words; they are not credentials anyway.
        new = {v for v in values if v and len(v) >= 6} - self._literals
        if not new:
            return
        self._literals |= new
        ordered = sorted(self._literals | {unquote(v) for v in self._literals}, key=len, reverse=True)
        self._literal_re = re.compile("|".join(re.escape(v) for v in ordered))

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if self._literal_re is not None:
            text = self._literal_re.sub(REDACTED, text)
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text


    def lines_changed(self, text: str) -> list[int]:
        """The 1-based lines of ``text`` where this scrubber would replace something (where each match starts).

        For output that must come out as written (``k8s render``'s ConfigMap): rather than let the
        stream wrapper rewrite a value silently, the command can name the line and refuse it.
        """
        patterns = ([self._literal_re] if self._literal_re is not None else []) + [p for p, _ in _PATTERNS]
        starts = {m.start() for pattern in patterns for m in pattern.finditer(text)}
        return sorted({text.count("\n", 0, start) + 1 for start in starts})


_active = Scrubber()


def scrub(text: str) -> str:
    """``text`` with every secret this process knows of, and every credential pattern, removed."""
    return _active(text)


def scrubbed_lines(text: str) -> list[int]:
    """The lines of ``text`` that :func:`scrub` (so this process's stdout) would rewrite."""
    return _active.lines_changed(text)


def scrub_any(value: Any) -> Any:
    """Scrub the strings inside a JSON-like structure."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: scrub_any(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_any(v) for v in value]
    return value


def url_secrets(url: str) -> list[str]:
    """The userinfo and token-like query values of a URL."""
    parts = urlsplit(url)
    found = [unquote(p) for p in (parts.username, parts.password) if p]
    found += query_secrets(dict(parse_qsl(parts.query)))
    return found


def query_secrets(query: dict[str, str], extra: Iterable[str] = ()) -> list[str]:
    extra = tuple(extra)
    return [v for k, v in query.items()
            if v and (looks_secret_name(k) or looks_secret_field(k, extra) or k.lower() == "code" or looks_like_token(v))]


#: Words of a body key that make its value a credential. Whole words, not substrings:
#: ``api_key``, ``secretToken``, ``client-secret`` are secret; ``max_tokens``, ``author``, ``keywords`` are not.
_SECRET_WORDS = frozenset({
    "key", "apikey", "token", "secret", "password", "passwd", "pwd", "passphrase", "credential", "credentials",
    "signature", "sig", "auth", "authorization", "bearer", "cookie",
})
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def looks_secret_field(name: str, extra: Iterable[str] = ()) -> bool:
    """A body (or query) key whose value is a credential: a secret word in it, or a name the scenario marked."""
    if name.lower() in {e.lower() for e in extra}:
        return True
    return any(word.lower() in _SECRET_WORDS for word in _WORD.findall(name))


def _leaves(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def body_secrets(body: Any, extra: Iterable[str] = ()) -> list[str]:
    """Every value under a secret-named key, at any depth of a JSON-like body (a whole subtree if it is one)."""
    extra = tuple(extra)
    found: list[str] = []
    if isinstance(body, dict):
        for k, v in body.items():
            found += list(_leaves(v)) if looks_secret_field(str(k), extra) else body_secrets(v, extra)
    elif isinstance(body, (list, tuple)):
        for v in body:
            found += body_secrets(v, extra)
    return found


def redact_body(body: Any, extra: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like body with the value of every secret-named key, at any depth, replaced."""
    extra = tuple(extra)
    if isinstance(body, dict):
        return {k: (REDACTED if looks_secret_field(str(k), extra) and v is not None else redact_body(v, extra))
                for k, v in body.items()}
    if isinstance(body, (list, tuple)):
        return [redact_body(v, extra) for v in body]
    return body


def install_for(target: Any, bodies: Iterable[Any] = ()) -> Scrubber:
    """Teach this process's scrubber the secrets of a scenario's ``target`` and request ``bodies``; return it.

    ``bodies`` are the ``extra_body`` mappings (the workload's and each class's):
    a gateway's ``{secret_token: …}`` is as much a credential as a header.
    """
    extra = tuple(getattr(target, "secret_fields", ()) or ())
    secrets: list[str | None] = [os.environ.get(name) for name in target.secret_env_names()]
    secrets += [v for k, v in target.headers.items() if looks_secret_name(k) or looks_secret_field(k, extra)]
    secrets += url_secrets(target.base_url)
    secrets += query_secrets(dict(target.query), extra)
    for body in bodies:
        secrets += body_secrets(body, extra)
    _active.add(*secrets)
    return _active


def remember(*values: str | None) -> None:
    """Teach this process's scrubber secrets from outside the scenario (a ``--pushgateway`` URL's password)."""
    _active.add(*values)


def public_url(url: str) -> str:
    """A URL fit for run.json or a message: userinfo and token-like query values replaced, the rest as given.

    Rebuilt part by part. Replacing each secret value wherever its text occurred also replaced
    it where it was no secret: a user ``u`` in ``https``, a one-digit password in the port.
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL after all: the patterns still apply
        return scrub(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = (f"{REDACTED}:{REDACTED}" if ":" in userinfo else REDACTED) + "@" + host
    query = "&".join(_public_param(p) for p in parts.query.split("&")) if parts.query else ""
    return scrub(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


def _public_param(param: str) -> str:
    """One ``name=value`` of a query, its value replaced if it is a secret (by name or shape)."""
    name, eq, value = param.partition("=")
    if eq and query_secrets({unquote_plus(name): unquote_plus(value)}):
        return f"{name}={REDACTED}"
    return param


class ScrubbingFormatter(logging.Formatter):
    """A log formatter whose every line (tracebacks included) is scrubbed."""

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


class _ScrubbedStream(io.TextIOBase):
    """A text stream that scrubs what is written to it, then passes it on.

    It also outlives its reader: ``loadtest run … | head`` closed the pipe after a few lines,
    the next print raised BrokenPipeError in the load's greenlets, and the run died with no
    summary and no word (its run.json said complete). The run's results go to its folder, not to
    this stream, so a reader that went away is not a reason to stop: the stream's file
    descriptor is pointed at /dev/null (so the interpreter's own flush at exit succeeds too), and
    the run goes on.
    """

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        try:
            self.inner.write(scrub(text))
        except BrokenPipeError:
            self._reader_gone()
        return len(text)

    def flush(self) -> None:
        try:
            self.inner.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self.inner.fileno())
            finally:
                os.close(null)
            self.inner.flush()  # what was buffered for the gone reader goes to /dev/null
        except (OSError, ValueError):
            self.inner = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")

    def writable(self) -> bool:
        return True


class scrubbed_std_streams:
    """Context manager: sys.stdout and sys.stderr scrubbed while it is open."""

    def __enter__(self) -> "scrubbed_std_streams":
        self._saved = sys.stdout, sys.stderr
        if not isinstance(sys.stdout, _ScrubbedStream):
            sys.stdout = _ScrubbedStream(sys.stdout)
        if not isinstance(sys.stderr, _ScrubbedStream):
            sys.stderr = _ScrubbedStream(sys.stderr)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout, sys.stderr = self._saved
