"""Images named by a dataset row: files sent as data URIs, URLs passed through as they are.

A jsonl row may carry ``"images"`` (a path or URL, or a list of them); a ShareGPT row LLaVA's
``"image"`` (the same). They join the row's prompt as ``image_url`` content parts, after the
generated ones of ``workload.images`` if both are asked for:

- a **file** (a path, relative to the dataset file's folder) is read and sent as a ``data:``
  URI of its type (``mimetypes``; else Pillow tells the format), as generated images are; its
  bytes are recorded (``image_bytes``);
- an **http(s) URL** is passed through as it is: the server fetches it, the load generator
  never does (no traffic but to the target), so its size is not known and the request's
  ``image_bytes`` is null (its ``images`` still counts it);
- a ``data:`` URI is sent as it is, its decoded size recorded;
- with ``dataset.images_as: served`` a file goes instead as the URL of the run's own image
  server on 127.0.0.1 (:mod:`image_server`), its size recorded.

Every reference is checked when the dataset loads: one line naming the file, the row's line and
the image's index. A file is read once per process and kept while the cache holds (a few
hundred images); a larger set is read per request, which costs disk, not the server's time.
"""

from __future__ import annotations

import base64
import mimetypes
from functools import lru_cache
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from loadtest.errors import InputError
from loadtest.workload.images import ImageSet

_PASSED = ("http://", "https://", "data:")


def row_images(value: Any, path: str, line: int) -> tuple[str, ...] | None:
    """A row's image references, resolved and checked (files relative to the dataset's folder)."""
    if value is None:
        return None
    where = f"{path}: line {line}"
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise InputError(f"{where}: 'images' must be a path or URL, or a non-empty list of them")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise InputError(f"{where}: images[{i}] must be a non-empty string (a path or an http(s) URL)")
        if item.startswith(_PASSED):
            out.append(item)
            continue
        file = Path(item).expanduser()
        file = file if file.is_absolute() else Path(path).parent / file
        if not file.is_file():
            raise InputError(f"{where}: images[{i}]: no such image file {str(file)!r}")
        out.append(str(file))
    return tuple(out)


def row_image_set(refs: tuple[str, ...], served: dict[str, str] | None = None) -> ImageSet:
    """The content parts of a row's images; ``bytes`` None when one is a URL (its size unknown).

    ``served``: the run's image server's file→URL map (``images_as: served``); a file not in it
    is an error, never silently sent another way.
    """
    parts, total, known = [], 0, True
    for ref in refs:
        if ref.startswith(("http://", "https://")):
            parts.append({"type": "image_url", "image_url": {"url": ref}})
            known = False
            continue
        if served is not None and not ref.startswith("data:"):
            if ref not in served:
                raise InputError(f"{ref}: dataset.images_as is served, but the run's image server does not serve it")
            parts.append({"type": "image_url", "image_url": {"url": served[ref]}})
            total += _file_size(ref)
            continue
        uri, size = (ref, _data_uri_bytes(ref)) if ref.startswith("data:") else _file_uri(ref)
        parts.append({"type": "image_url", "image_url": {"url": uri}})
        total += size
    return ImageSet(parts, len(parts), total if known else None, 0)  # type: ignore[arg-type]


def merge(first: ImageSet | None, second: ImageSet | None) -> ImageSet | None:
    """Two requests' worth of parts as one (a row's images, then the generated ones)."""
    if first is None or second is None:
        return first or second
    size = None if first.bytes is None or second.bytes is None else first.bytes + second.bytes
    return ImageSet(first.parts + second.parts, first.count + second.count, size, first.pixels + second.pixels)  # type: ignore[arg-type]


@lru_cache(maxsize=4096)
def _file_size(path: str) -> int:
    try:
        return Path(path).stat().st_size
    except OSError as err:
        raise InputError(f"{path}: cannot read the image: {err.strerror or err}") from None


@lru_cache(maxsize=256)
def _file_uri(path: str) -> tuple[str, int]:
    """A file as a data URI and its size: read once while the cache keeps it."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read the image: {err.strerror or err}") from None
    mime = mimetypes.guess_type(path)[0]
    if mime is None or not mime.startswith("image/"):
        mime = _sniffed(path)
    return f"data:{mime};base64,{base64.b64encode(data).decode()}", len(data)


def _sniffed(path: str) -> str:
    try:
        with Image.open(path) as image:
            fmt = image.format
    except (UnidentifiedImageError, OSError):
        raise InputError(f"{path}: not an image Pillow can read (name it .png, .jpg, .webp, …)") from None
    return Image.MIME.get(fmt or "", "application/octet-stream")


def _data_uri_bytes(uri: str) -> int:
    """The decoded size of a base64 data URI's payload (its characters otherwise)."""
    head, _, payload = uri.partition(",")
    if head.endswith(";base64"):
        return len(payload) * 3 // 4 - payload[-2:].count("=")
    return len(payload)
