"""Remote paths: parse them, list, download and upload run folders through :mod:`pyarrow.fs`."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from loadtest.errors import LoadtestError

SCHEMES = ("s3://",)
#: Not needed to analyze or compare a run: not downloaded.
SKIP_SUFFIXES = (".html", ".log", ".tmp")


class StorageError(LoadtestError):
    """Object storage could not be read or written (credentials, bucket, endpoint). Exit code 2."""

    exit_code = 2


class RemotePath(str):
    """An ``s3://`` URL as a command-line value (``pathlib`` would fold its ``//``)."""

    def join(self, *parts: str) -> "RemotePath":
        return RemotePath("/".join([self.rstrip("/"), *(p.strip("/") for p in parts)]))

    @property
    def name(self) -> str:
        return self.rstrip("/").rsplit("/", 1)[-1]

    @property
    def is_prefix(self) -> bool:
        """``s3://bucket/prefix/``: a place for run folders, not one run folder."""
        return self.endswith("/")


def is_remote(value: object) -> bool:
    return as_remote(value) is not None


def as_remote(value: object) -> RemotePath | None:
    """The URL a command-line value names, or None for a local path.

    ``Path("s3://b/k")`` reads back as ``s3:/b/k``: both spellings are recognised.
    """
    text = str(value)
    if text.startswith("s3://"):
        return RemotePath(text)
    if text.startswith("s3:/"):
        return RemotePath("s3://" + text[len("s3:/"):])
    return None


def path_arg(text: str) -> Path | RemotePath:
    """argparse type: a local :class:`Path`, or a :class:`RemotePath` for ``s3://…``."""
    return as_remote(text) or Path(text)


def _fs(url: str):
    """The filesystem and the bucket/key path of ``url``."""
    # pyarrow.fs: only when a run folder is a bucket URL
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(url.rstrip("/") or url)
    except (OSError, ValueError) as err:
        raise StorageError(f"{url}: {_one_line(err)}") from None


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


@contextmanager
def _guard(url: str) -> Iterator[None]:
    """Turn pyarrow's errors (no bucket, access denied, no endpoint) into one line naming the URL."""
    try:
        yield
    except OSError as err:
        raise StorageError(f"{url}: {_one_line(err)}") from None


def check_bucket(url: str) -> None:
    """The bucket exists and the credentials may see it (before a run sends any load)."""
    # pyarrow.fs: only when a run folder is a bucket URL
    import pyarrow.fs as pafs

    fs, path = _fs(url)
    bucket = path.split("/", 1)[0]
    with _guard(url):
        found = fs.get_file_info(bucket).type
    if found == pafs.FileType.NotFound:
        raise StorageError(f"{url}: no such bucket '{bucket}' (or these credentials may not see it)")


def list_files(url: str) -> dict[str, int]:
    """Every file under ``url`` (relative path → size); empty when there is none."""
    # pyarrow.fs: only when a run folder is a bucket URL
    import pyarrow.fs as pafs

    fs, root = _fs(url)
    with _guard(url):
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return {i.path[len(root):].lstrip("/"): i.size for i in infos if i.type == pafs.FileType.File}


def read_bytes(url: str) -> bytes:
    fs, path = _fs(url)
    with _guard(url), fs.open_input_stream(path) as f:
        return f.read()


def read_parquet_footer(url: str):
    """The Parquet footer of ``url`` (a ranged read, not the whole object); raises on a bad file."""
    # pyarrow.parquet: only when a run folder is a bucket URL
    import pyarrow.parquet as pq

    fs, path = _fs(url)
    with _guard(url), fs.open_input_file(path) as f:
        return pq.read_metadata(f)


def write_bytes(url: str, data: bytes) -> None:
    fs, path = _fs(url)
    with _guard(url), fs.open_output_stream(path) as f:
        f.write(data)


def upload_file(local: Path, url: str) -> None:
    write_bytes(url, Path(local).read_bytes())


def delete(url: str) -> None:
    fs, path = _fs(url)
    with _guard(url):
        fs.delete_file(path)


def download_tree(url: str, dest: Path, skip: Iterable[str] = SKIP_SUFFIXES,
                  only: Iterable[str] | None = None, marks: Iterable[str] = ()) -> list[Path]:
    """Copy every file under ``url`` into ``dest`` (keeping the layout); return the files written.

    ``only``: the file names to copy, wherever they are under ``url`` (None: all but ``skip``).
    ``marks``: file names not copied but stood for by an empty file, where a reader asks only whether
    the file is there (``history`` tells a run's own folder from a baseline copied from it by its
    report.html, megabytes it does not read).
    """
    skip = tuple(skip)
    names = set(only) if only is not None else None
    marked = set(marks)
    out = []
    for rel in sorted(list_files(url)):
        if rel.rsplit("/", 1)[-1] in marked:
            target = Path(dest) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
            continue
        if rel.endswith(skip) or (names is not None and rel.rsplit("/", 1)[-1] not in names):
            continue
        target = Path(dest) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(read_bytes(f"{url.rstrip('/')}/{rel}"))
        out.append(target)
    return out
