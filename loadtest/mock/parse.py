"""Request bodies in, a validated :class:`CompletionRequest` out, or a 400.

The mock is lenient where a real server would be picky in ways that do not
matter to a load test (any model name, unknown fields ignored, content given
as parts), and strict where a mistake would silently change what is measured
(``max_tokens`` must be a positive integer, one prompt, one choice). Every
problem becomes a :class:`BadRequest` that the server answers as OpenAI does,
with HTTP 400 and an ``invalid_request_error`` naming the offending ``param``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from loadtest.mock.config import DEFAULT_MAX_TOKENS, MAX_MAX_TOKENS
from loadtest.mock.structured import StructuredPlan, plan_for
from loadtest.mock.vision import BadImage, image_tokens


class BadRequest(Exception):
    """A request body the mock refuses; ``param`` names the field, as in OpenAI's errors."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """What the engine and the encoder need from a request body."""

    chat: bool
    model: str
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool
    continuous_usage: bool
    #: A tool call or JSON document the answer must be (chat only; None: plain text).
    structured: StructuredPlan | None = None
    #: A /v1/responses request: encoded as the Responses API's events (responses.py).
    responses: bool = False
    #: The prompt's text (what the prefix cache keys on).
    prompt: str = ""


def parse_request(body: bytes, *, chat: bool, vision: tuple[int, int] = (64, 784)) -> CompletionRequest:
    """Validate a ``/v1/chat/completions`` (``chat``) or ``/v1/completions`` body."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadRequest(
            "We could not parse the JSON body of your request. "
            "(HINT: This likely means you aren't using your HTTP library correctly. "
            "The OpenAI API expects a JSON payload.)"
        ) from None
    if not isinstance(data, dict):
        raise BadRequest("The request body must be a JSON object.")

    model = data.get("model")
    if model is None:
        raise BadRequest("you must provide a model parameter", "model")
    if not isinstance(model, str) or not model:
        raise BadRequest("Invalid 'model': expected a non-empty string.", "model")

    prompt, vision_tokens = _chat_prompt(data, vision) if chat else (_completion_prompt_text(data), 0)
    prompt_tokens = (count_words(prompt) if isinstance(prompt, str) else len(prompt)) + vision_tokens
    max_tokens = _max_tokens(data, chat)

    n = data.get("n")
    if n is not None and (type(n) is not int or n != 1):
        raise BadRequest("Invalid 'n': the mock generates exactly one choice (n=1).", "n")

    stream = data.get("stream")
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise BadRequest(f"Invalid 'stream': expected a boolean, got {stream!r}.", "stream")

    options = data.get("stream_options")
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise BadRequest("Invalid 'stream_options': expected an object.", "stream_options")
    include_usage = _flag(options, "include_usage")
    continuous_usage = _flag(options, "continuous_usage_stats")

    return CompletionRequest(
        chat=chat,
        model=model,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous_usage,
        structured=plan_for(data) if chat else None,
        prompt=prompt if isinstance(prompt, str) else "",
    )


def json_body(body: bytes) -> dict[str, Any]:
    """A request body as a JSON object with a ``model``, or the 400 OpenAI answers (every route's first check)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadRequest("We could not parse the JSON body of your request.") from None
    if not isinstance(data, dict):
        raise BadRequest("The request body must be a JSON object.")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("you must provide a model parameter", "model")
    return data


def count_words(text: str) -> int:
    """Prompt tokens, as the mock counts them: whitespace-separated words."""
    return len(text.split())


def _chat_prompt(data: dict[str, Any], vision: tuple[int, int] = (64, 784)) -> tuple[str, int]:
    """The messages' text (what the prefix cache keys on) and their images' prompt tokens (vision.py)."""
    messages = data.get("messages")
    if messages is None:
        raise BadRequest("Missing required parameter: 'messages'.", "messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("Invalid 'messages': expected a non-empty array.", "messages")
    texts: list[str] = []
    image = 0
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadRequest(f"Invalid 'messages[{i}]': expected an object.", f"messages[{i}]")
        content = message.get("content")
        if content is None:
            continue
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            # Content parts: the text parts' words, and each image's tokens (vision.py).
            for j, part in enumerate(content):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                try:
                    image += image_tokens(part, *vision)
                except BadImage as err:
                    raise BadRequest(f"Invalid 'messages[{i}].content[{j}]': {err}", f"messages[{i}].content[{j}]") from None
        else:
            raise BadRequest(
                f"Invalid 'messages[{i}].content': expected a string or an array of parts.",
                f"messages[{i}].content",
            )
    return " ".join(texts), image


def _completion_prompt_text(data: dict[str, Any]) -> str | list[int]:
    prompt = data.get("prompt")
    if prompt is None:
        raise BadRequest("Missing required parameter: 'prompt'.", "prompt")
    # OpenAI accepts a string, an array of token ids, or an array of one of those per
    # prompt. The mock serves one prompt per request.
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(type(t) is int for t in prompt):
        return prompt  # token ids: counted, not cached
    raise BadRequest(
        "Invalid 'prompt': expected a string or an array of token ids (one prompt per request).",
        "prompt",
    )


def _max_tokens(data: dict[str, Any], chat: bool) -> int:
    param = "max_tokens"
    value = data.get("max_tokens")
    if chat and data.get("max_completion_tokens") is not None:
        # The newer name wins, as in OpenAI's API.
        param, value = "max_completion_tokens", data["max_completion_tokens"]
    if value is None:
        return DEFAULT_MAX_TOKENS
    if type(value) is not int or value < 1:
        raise BadRequest(f"Invalid '{param}': expected a positive integer, got {value!r}.", param)
    if value > MAX_MAX_TOKENS:
        raise BadRequest(f"Invalid '{param}': at most {MAX_MAX_TOKENS} in the mock.", param)
    return value


def _flag(options: dict[str, Any], name: str) -> bool:
    value = options.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest(
            f"Invalid 'stream_options.{name}': expected a boolean.", f"stream_options.{name}"
        )
    return value
