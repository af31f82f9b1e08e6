"""Images in the mock's chat requests: each one is prompt tokens, so prefill time.

A vision model turns an image into tokens before the prompt is prefilled
(Qwen2-VL: one token per 28 × 28 pixels; LLaVA: a fixed 576 per image), and a
server's ``usage.prompt_tokens`` counts them. The mock does the same: each
``image_url`` part costs ``--image-tokens`` (per image) plus one token per
``--pixels-per-token`` pixels, the engine charges them ``P`` each like text
tokens (MODEL.md), and ``usage.prompt_tokens`` includes them. The size comes
from the image's own header (Pillow reads it without decoding the pixels);
an ``http(s)`` URL, which the mock never fetches, costs the per-image tokens.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from typing import Any

from PIL import Image, UnidentifiedImageError


class BadImage(ValueError):
    """An image part the mock cannot read (the server answers 400)."""


def image_size(url: str) -> tuple[int, int] | None:
    """(width, height) of a ``data:`` URI's image; None for a URL the mock does not fetch."""
    if not url.startswith("data:"):
        return None
    head, comma, data = url.partition(",")
    if not comma or ";base64" not in head:
        raise BadImage("an image data URI must be base64 (data:image/...;base64,...)")
    try:
        raw = base64.b64decode(data, validate=False)
        with Image.open(io.BytesIO(raw)) as image:
            return image.size
    except (binascii.Error, UnidentifiedImageError, OSError) as err:
        raise BadImage(f"the image cannot be read: {err}") from None


def image_tokens(part: Any, per_image: int, pixels_per_token: int) -> int:
    """Prompt tokens of one ``image_url`` content part (0 for any other part)."""
    if not isinstance(part, dict) or part.get("type") != "image_url":
        return 0
    ref = part.get("image_url")
    url = ref.get("url") if isinstance(ref, dict) else ref
    if not isinstance(url, str):
        raise BadImage("image_url.url must be a string")
    size = image_size(url)
    pixels = size[0] * size[1] if size else 0
    return per_image + math.ceil(pixels / pixels_per_token)
