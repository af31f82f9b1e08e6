"""What each request kind (``target.api``) can be asked for, checked once when the scenario loads.

Embeddings are not streamed: there is no first token and no gap between
tokens, so an SLO on TTFT, ITL or TPOT could never be judged (every level
would stay undecided), and conversations, tools and structured output have no
meaning there. Each is one line naming the field; ``batch_size`` on a chat
workload is refused the same way rather than silently ignored. So is a
``min_valid_output_rate`` floor on a workload that asks for no structured
output: no answer would ever be checked, and the floor would judge nothing.
"""

from __future__ import annotations

from typing import Any

from loadtest.metric_registry import names

#: Metrics that only a stream has (the registry's SLO metrics not measured for a unary answer).
STREAM_METRICS = names(slo=True, unary=False)
#: The kinds that are not streamed and take a batch of inputs (``batch_size``).
_POOLING = ("embeddings", "rerank", "score")
_CHAT_ONLY = ("conversation", "tools", "tool_choice", "response_format", "shared_prefix", "images")
#: The Responses API spells tools and structured output differently (flat tools, text.format):
#: not built yet, so refused rather than sent in the chat shape a server would reject.
_NOT_FOR_RESPONSES = ("tools", "tool_choice", "response_format")


def kind_problem(scenario: Any) -> str | None:
    """``path: what is wrong`` for a field the scenario's API cannot serve, or None."""
    api = scenario.target.api
    w = scenario.workload
    holders = [("workload", w, scenario.slo)] + [(f"workload.classes[{i}]", c, c.slo) for i, c in enumerate(w.classes)]
    structured = any(getattr(h, n, None) is not None for _, h, _ in holders for n in ("tools", "response_format"))
    for path, _holder, slo in holders:
        if slo is not None and slo.min_valid_output_rate is not None and not structured:
            where = "slo" if path == "workload" else f"{path}.slo"
            return (f"{where}.min_valid_output_rate: the workload asks for no structured output "
                    f"(give workload.tools or workload.response_format, or drop the floor)")
    for path, holder, slo in holders:
        if api != "rerank" and api != "score" and getattr(holder, "query_tokens", None) is not None:
            return f"{path}.query_tokens: only with target.api rerank or score (the query a batch is ranked against)"
        if api in _POOLING:
            for name in _CHAT_ONLY:
                if getattr(holder, name, None) is not None:
                    return f"{path}.{name}: not with target.api {api} ({api} is not chat)"
            for check in (slo.checks if slo is not None else ()):
                if check.metric in STREAM_METRICS:
                    where = "slo" if path == "workload" else f"{path}.slo"
                    noun = "embeddings" if api == "embeddings" else f"{api} answers"
                    return (f"{where}.{check.metric}: {noun} are not streamed (no first token, no token gaps); "
                            f"judge e2e_ms (or ttfb_ms)")
        else:
            if api == "responses":
                for name in _NOT_FOR_RESPONSES:
                    if getattr(holder, name, None) is not None:
                        return (f"{path}.{name}: not with target.api responses yet (its tools and text.format "
                                f"differ from chat's; use extra_body to send them as is)")
            if api != "chat" and getattr(holder, "images", None) is not None:
                return f"{path}.images: only with target.api chat (images are image_url parts of a chat message)"
            size = getattr(holder, "batch_size", None)
            if size not in (None, 1):
                return f"{path}.batch_size: only with target.api embeddings, rerank or score (a chat request has one prompt)"
    return None
