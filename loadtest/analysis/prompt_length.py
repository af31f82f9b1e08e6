"""The prompt length asked for against the one the server counted.

A scenario's ``prompt_tokens: {mean: 64}`` sends prompts of about 64 one-token words; a trial's
llama-server counted a mean of 132 (``usage.prompt_tokens``): its chat template added about 56
tokens, and its small vocabulary split some words. Every figure that depends on the prompt
(TTFT, prefill, the server's work per request) was measured at twice the length the scenario
named, and nothing said so. Each record keeps both counts (``prompt_tokens_asked``: the
workload's own, ``prompt_tokens``: the server's where it gave usage), and this module compares
their means over the successful requests.

The warning is kept to prompts whose own count is a token count by construction: synthetic
one-token words (``workload.prompt_tokens``, a shared prefix of them) and a trace's lengths. A
dataset's text, a conversation's history (the model's own answers) or images are counted in
words or not at all, and differ from any tokenizer's count as a matter of course.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from loadtest.analysis.columns import numeric, text

#: The gap between the two means past which a warning names it (a chat template of a few tokens
#: on a short prompt stays under it; one that doubles the prompt does not).
WARN_RATIO = 0.25


@dataclass(frozen=True)
class PromptLength:
    """Mean prompt tokens per successful request: asked (the workload's count) and counted (the server's)."""

    #: the workload's own count: one-token words sent, or the trace rows' lengths ("words" | "trace")
    asked_mean: float
    asked_source: str
    #: the server's ``usage.prompt_tokens`` over the same requests; None when it reported none
    counted_mean: float | None
    #: "usage" when the server counted them, "estimate" when the figures rest on the workload's count
    source: str
    #: successful requests in the comparison (with usage: those the server counted)
    requests: int
    #: the asked count is a token count by construction (synthetic words, a trace): the warning applies
    comparable: bool

    @property
    def ratio(self) -> float | None:
        """counted / asked (None without the server's count)."""
        if self.counted_mean is None or not self.asked_mean:
            return None
        return self.counted_mean / self.asked_mean

    def to_dict(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "asked_mean": round(self.asked_mean, 1),
            "asked_source": self.asked_source,
            "counted_mean": None if self.counted_mean is None else round(self.counted_mean, 1),
            "ratio": None if ratio is None else round(ratio, 3),
            "source": self.source,
            "requests": self.requests,
            "comparable": self.comparable,
        }

    def words(self) -> str:
        """"64.2 asked (one-token words sent), 132.0 counted by the server (usage.prompt_tokens, +106%)"."""
        asked = f"{self.asked_mean:.1f} asked ({_ASKED[self.asked_source]})"
        if self.counted_mean is None:
            return f"{asked}; the server reported no usage.prompt_tokens, so every prompt figure is this estimate"
        return (f"{asked}, {self.counted_mean:.1f} counted by the server "
                f"(usage.prompt_tokens, {self.ratio - 1:+.0%}), mean per request")

    def warning(self) -> str | None:
        """The sentence for the warnings when the server counted far more or fewer than asked, else None."""
        ratio = self.ratio
        if ratio is None or not self.comparable or abs(ratio - 1) <= WARN_RATIO:
            return None
        return (f"prompt tokens: the server counted a mean of {self.counted_mean:.1f} per request "
                f"(usage.prompt_tokens) where the workload asked for {self.asked_mean:.1f} "
                f"({_ASKED[self.asked_source]}), {ratio - 1:+.0%}: every figure was measured at the server's "
                "length (a chat template, a system prompt the server adds, or a tokenizer that splits the "
                "words); set workload.prompt_tokens for the length you mean the server to see")


_ASKED = {"words": "one-token words sent", "trace": "the trace rows' lengths"}


def prompt_length(requests: pd.DataFrame, ok: np.ndarray, run: Mapping[str, Any]) -> PromptLength | None:
    """Compare the means over the successful requests that carry the workload's count (None: none do,
    e.g. a run recorded before the column existed)."""
    asked = numeric(requests, "prompt_tokens_asked")
    counted = numeric(requests, "prompt_tokens")
    usage = np.array([s == "usage" for s in text(requests, "prompt_token_source")], dtype=bool)
    rows = ok & np.isfinite(asked)
    if not rows.any():
        return None
    trace = bool(((run.get("scenario") or {}).get("workload") or {}).get("trace"))
    counted_rows = rows & usage & np.isfinite(counted)
    if counted_rows.any():
        asked_mean, counted_mean, n, source = (float(np.mean(asked[counted_rows])), float(np.mean(counted[counted_rows])),
                                               int(counted_rows.sum()), "usage")
    else:
        asked_mean, counted_mean, n, source = float(np.mean(asked[rows])), None, int(rows.sum()), "estimate"
    return PromptLength(asked_mean=asked_mean, asked_source="trace" if trace else "words",
                        counted_mean=counted_mean, source=source, requests=n, comparable=_comparable(run))


def _comparable(run: Mapping[str, Any]) -> bool:
    """Are the prompts one-token words or trace lengths throughout (no dataset, conversation or images)?"""
    workload = (run.get("scenario") or {}).get("workload") or {}
    parts = [workload, *(workload.get("classes") or [])]
    return not any(part.get(key) for part in parts for key in ("dataset", "conversation", "images"))
