"""Generated images for chat requests (``workload.images``), with Pillow.

Images are prefill: a vision model turns each into hundreds of tokens, so a
capacity figure for an endpoint that serves images must be measured with
images of the sizes it serves. Each request's images are generated here:

- **seeded and unique**: a background colour and a 16 × 16 tile of noise at a
  place drawn from the user's seeded RNG (and the run's salt), so no two
  requests of a run, or of two runs, share an image (a server's image or
  prefix cache cannot serve it) unless ``unique: false`` asks for one shared
  image per size;
- **cheap to make**: a flat image with a small tile compresses and encodes in
  well under a millisecond per megapixel as PNG, so the load generator's own
  time stays out of the measurement;
- sent as ``image_url`` content parts holding ``data:`` URIs (what OpenAI,
  vLLM and llama-server all accept).

The record keeps each request's image count and encoded bytes, and the
server's ``usage.prompt_tokens`` (vision tokens included) stays the prompt count.
"""

from __future__ import annotations

import base64
import io
import random
from dataclasses import dataclass
from typing import Any

from PIL import Image

_MIME = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
_TILE = 16
#: Fast settings: the encoder's time is the load generator's, taken from the measurement's budget.
_OPTIONS: dict[str, dict[str, Any]] = {"png": {"compress_level": 1}, "jpeg": {"quality": 90}, "webp": {"quality": 80, "method": 0}}


@dataclass(frozen=True)
class ImageSet:
    """One request's images: the content parts and what the record says about them."""

    parts: list[dict[str, Any]]
    count: int
    #: Encoded bytes; None when an image's size is not known (a URL the server fetches: image_sources.py).
    bytes: int | None
    pixels: int


def _size(value: Any, rng: random.Random) -> int:
    return value if isinstance(value, int) else value.sample(rng)


def encode(width: int, height: int, fmt: str, rng: random.Random | None) -> bytes:
    """One image as ``fmt`` bytes: flat colour plus a seeded noise tile (None: a fixed, shared image)."""
    pick = rng or random.Random(f"{width}x{height}")
    image = Image.new("RGB", (width, height), tuple(pick.randrange(256) for _ in range(3)))
    tile = Image.frombytes("RGB", (_TILE, _TILE), pick.randbytes(_TILE * _TILE * 3))
    image.paste(tile, (pick.randrange(max(1, width - _TILE + 1)), pick.randrange(max(1, height - _TILE + 1))))
    out = io.BytesIO()
    image.save(out, format=fmt.upper(), **_OPTIONS[fmt])
    return out.getvalue()


class ImageMaker:
    """Makes the images of one class's requests (one maker per user and class)."""

    def __init__(self, spec: Any, seed: str) -> None:
        self.spec = spec
        self._rng = random.Random(f"images-{seed}")
        self._shared: dict[tuple[int, int], bytes] = {}

    def next(self) -> ImageSet:
        spec, rng = self.spec, self._rng
        parts, total, pixels = [], 0, 0
        for _ in range(_size(spec.count, rng)):
            width, height = _size(spec.width, rng), _size(spec.height, rng)
            if spec.unique:
                data = encode(width, height, spec.format, random.Random(rng.getrandbits(64)))
            else:
                data = self._shared.get((width, height)) or self._shared.setdefault(
                    (width, height), encode(width, height, spec.format, None))
            uri = f"data:{_MIME[spec.format]};base64,{base64.b64encode(data).decode()}"
            parts.append({"type": "image_url", "image_url": {"url": uri}})
            total += len(data)
            pixels += width * height
        return ImageSet(parts, len(parts), total, pixels)
