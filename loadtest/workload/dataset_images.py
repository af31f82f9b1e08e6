"""The image files a dataset's rows name, so that a dataset's content hash covers its images too.

A jsonl row's ``images`` (a ShareGPT row's ``image`` or ``images``, as :mod:`image_sources` reads
them) names files beside the dataset. The prompts are the text, but the images are prefill: a
run with the same jsonl and other pictures asked the server for other work, so the compare
fingerprint (:mod:`loadtest.fingerprint`) must tell them apart. This module only lists the files;
it reads no image (no Pillow) and never fails: a row it cannot read names nothing here, and
loading the dataset for a run reports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from loadtest.errors import InputError
from loadtest.workload.dataset import _READ_SIZE, _sharegpt_rows

#: References passed to the server as they are (not files): their bytes are not the dataset's.
_NOT_FILES = ("http://", "https://", "data:")


def image_files(path: Path) -> list[tuple[str, Path]]:
    """(reference as the rows spell it, resolved file) for each distinct existing image file, in row order.

    ShareGPT's reader takes both formats (a JSON array, or one object per line), so the
    dataset's ``format`` is not needed.
    """
    out: dict[str, Path] = {}
    try:
        with open(path, "rb") as fh:
            for _, row in _sharegpt_rows(_chunks(fh), str(path)):
                if not isinstance(row, dict):
                    continue
                value = row.get("images", row.get("image"))
                for ref in [value] if isinstance(value, str) else value if isinstance(value, list) else ():
                    if not isinstance(ref, str) or not ref.strip() or ref.startswith(_NOT_FILES) or ref in out:
                        continue
                    file = Path(ref).expanduser()
                    file = file if file.is_absolute() else path.parent / file
                    if file.is_file():
                        out[ref] = file
    except (OSError, InputError, ValueError):  # unreadable or not JSON: the run's own load says so
        pass
    return list(out.items())


def _chunks(fh: Any) -> Iterator[bytes]:
    while chunk := fh.read(_READ_SIZE):
        yield chunk
