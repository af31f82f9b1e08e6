"""The Responses API (``POST /v1/responses``, OpenAI and vLLM): its event stream, read by the same rules.

A Responses stream is a sequence of named SSE events whose ``data`` carries a
``type`` equal to the event name (``response.created``, ``response.output_text.delta``,
..., ``response.completed``), and no ``[DONE]``: the stream ends with
``response.completed`` (or ``response.incomplete`` when ``max_output_tokens``
cut it, still a whole answer, as ``finish_reason: length`` is), or fails with
``response.failed`` or an ``error`` event. What counts for the measurement:

- **content** (TTFT, ITL): a non-empty ``response.output_text.delta``, a
  ``response.refusal.delta``, a ``response.function_call_arguments.delta`` (a
  tool call is generated content, as in chat), and reasoning deltas
  (``response.reasoning_text.delta``, ``response.reasoning_summary_text.delta``);
  never ``response.created``, ``in_progress``, ``output_item.added`` or ``content_part.added``
  (no token was generated yet), nor the ``.done`` events, which repeat the text;
- **usage**: ``response.completed``'s ``response.usage``: ``output_tokens``
  (with ``output_tokens_details.reasoning_tokens``), ``input_tokens`` and
  ``input_tokens_details.cached_tokens`` (prefix-cache hits: OpenAI, vLLM and
  llama-server all send it; llama-server adds its own ``timings`` beside ``response``);
- **errors**: an ``error`` event, ``response.failed`` (its ``response.error``)
  and an unnamed ``data: {"error": {...}}`` (llama-server's mid-stream error on
  this route: the chat-style error, with no ``event:`` line) are ``stream_error``; a stream that ends without a terminal event is a
  ``disconnect``, as a chat stream without ``[DONE]`` is.
"""

from __future__ import annotations

from typing import Any

from loadtest.client.wire import ChunkFacts, _count

_TEXT = frozenset({"response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta"})
_REASONING = frozenset({"response.reasoning_text.delta", "response.reasoning_summary_text.delta"})
_FINAL = frozenset({"response.completed", "response.incomplete"})


def read_event(obj: Any) -> ChunkFacts:
    """Classify one decoded Responses event (raises TypeError for JSON that is not an event)."""
    if not isinstance(obj, dict):
        raise TypeError("event is not a JSON object")
    facts = ChunkFacts()
    kind = obj.get("type")
    if kind in _TEXT:
        facts.content = bool(obj.get("delta"))
    elif kind in _REASONING:
        facts.content = facts.reasoning = bool(obj.get("delta"))
    elif kind in _FINAL:
        facts.finished = True
        response = obj.get("response") or {}
        usage = response.get("usage") if isinstance(response, dict) else None
        if isinstance(usage, dict):
            facts.usage_completion = usage.get("output_tokens")
            facts.usage_prompt = _count(usage.get("input_tokens"))
            details = usage.get("output_tokens_details")
            if isinstance(details, dict):
                facts.reasoning_tokens = _count(details.get("reasoning_tokens"))
            cached = usage.get("input_tokens_details")
            if isinstance(cached, dict):
                facts.cached_tokens = _count(cached.get("cached_tokens"))
    elif kind == "response.failed":
        response = obj.get("response") or {}
        err = response.get("error") if isinstance(response, dict) else None
        facts.error = str(err.get("message", err)) if isinstance(err, dict) else f"response.failed: {err}"
    elif kind == "error" or obj.get("error"):
        err = obj.get("error") or obj
        facts.error = str(err.get("message") or err.get("code") or err) if isinstance(err, dict) else str(err)
    return facts


def event_text(obj: Any) -> str:
    """The answer text an event carries (only ``response.output_text.delta``)."""
    return str(obj.get("delta") or "") if obj.get("type") == "response.output_text.delta" else ""
