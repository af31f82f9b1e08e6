"""What the server says about its model: llama.cpp's ``/v1/models`` meta and ``/props`` context and slots.

Read by ``profile`` (its ladder and roofline) and by ``run`` when the scenario declares
``hardware:`` (run.json's ``model_meta``, for the roofline of the bound at capacity).

Why: the roofline needs the model's size, and the prompt ladder must fit the
context. llama.cpp tells both (``meta.n_params``, ``meta.size``, and the
per-slot ``n_ctx`` in ``/props``), and its slots (``total_slots``, its ``-np``:
a profile's decode ladder stops when the step doubles, often below them, so
the batch never showed them); vLLM tells ``max_model_len`` in ``/v1/models``
(its ``max_num_seqs`` is not there, and is not read). Whatever a server does not tell is simply absent: one GET
each, short timeouts, never fatal.
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from loadtest.analysis.stack import model_meta
from loadtest.urls import basic_auth, request_url, split_userinfo


def _get(url: str, headers: dict[str, str]) -> Any:
    # urllib would take a URL's user:password@ for the host and ask the resolver for it
    url, userinfo = split_userinfo(url)
    if userinfo is not None and "Authorization" not in headers:
        headers = {**headers, "Authorization": basic_auth(*userinfo)}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:  # noqa: S310 - the scenario's own target
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


def read_server_facts(target: Any) -> dict[str, Any]:
    """``{n_params, size, n_ctx_train, n_ctx, slots}`` as far as the server tells (possibly ``{}``)."""
    headers = dict(target.resolved_headers()) if hasattr(target, "resolved_headers") else {}
    key = os.environ.get(target.api_key_env) if target.api_key_env else None
    if key:
        headers["Authorization"] = f"Bearer {key}"
    models = _get(request_url(target.base_url, "/models", target.query), headers)
    facts = model_meta(models)
    try:
        max_len = models["data"][0].get("max_model_len")  # vLLM
        if isinstance(max_len, int):
            facts["n_ctx"] = max_len
    except (KeyError, IndexError, TypeError, AttributeError):
        pass
    parts = urlsplit(target.base_url)  # the base URL may carry a query: the path is cut, not the text
    root = urlunsplit(parts._replace(path=parts.path.rstrip("/").removesuffix("/v1")))
    props = _get(request_url(root, "/props", target.query), headers)
    if isinstance(props, dict):
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
        if isinstance(n_ctx, int) and n_ctx > 0:
            facts["n_ctx"] = n_ctx  # llama.cpp: per slot, what one request may use
        slots = props.get("total_slots")
        if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0:
            facts["slots"] = slots  # llama.cpp: -np, the sequences it decodes at once
    return facts
