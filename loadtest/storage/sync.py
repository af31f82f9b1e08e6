"""Upload a run folder as it grows: a child process that mirrors the local folder to a URL.

The run writes its folder locally as always (part files at least once a second,
``run.json`` as levels start and end). This child uploads every new or changed
file once per interval, so a pod that is killed loses no more than a local run
would (what came since the last flush, plus at most one interval). It is a child
process, not a thread, because an upload must never hold the load's event loop
or the interpreter lock the chunk timestamps need.

It stops when its standard input closes: when the run ends and closes it, and
also when the run is killed (the kernel closes the pipe), so the last parts are
uploaded either way. Files removed locally (the part files, once merged into
``requests.parquet``) are removed remotely after the merged file is up.

    python -m loadtest.storage.sync LOCAL_DIR s3://bucket/prefix/run --interval 1
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from loadtest.parent_pipe import watch_for_eof
from loadtest.run_files import RUN_JSON
from loadtest.storage import remote

INTERVAL_S = 1.0


def local_files(local: Path) -> dict[str, tuple[int, int]]:
    """Every file of the run folder that is the mirror's business (relative path → size and mtime).

    The run removes folders while this lists them (``requests.parts/`` and
    ``server_metrics.parts/`` once merged), so a folder that goes between its
    listing and its scan is skipped: ``os.walk`` ignores it, where
    ``Path.rglob`` raised and ended the mirror before the run's last files.
    """
    out = {}
    for folder, _subfolders, names in os.walk(local):
        for name in names:
            if name.endswith(".tmp") or name.startswith("."):
                continue  # a file being written atomically (its final name comes next pass), the disk reserve
            path = Path(folder, name)
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            out[path.relative_to(local).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


class Mirror:
    """What was uploaded (size and mtime per file), so each pass sends only what changed."""

    def __init__(self, local: Path, url: str) -> None:
        self.local = Path(local)
        self.url = url.rstrip("/")
        self.sent: dict[str, tuple[int, int]] = {}
        self.errors = 0
        self._last_error: str | None = None
        self._last_report = float("-inf")

    def _report(self, message: str) -> None:
        """One line per new error, and a reminder a minute into an outage (not one a second)."""
        now = time.monotonic()
        kind = re.sub(r"\(Request ID: [^)]*\)", "", message)  # the same error, another request
        if kind != self._last_error or now - self._last_report >= 60:
            print(f"loadtest upload: {message} (retrying; the run folder is kept locally)", file=sys.stderr, flush=True)
            self._last_error, self._last_report = kind, now

    def sync(self) -> int:
        """One pass: upload new and changed files (parts first), then remove what went locally."""
        files = local_files(self.local)
        changed = sorted((rel for rel, stamp in files.items() if self.sent.get(rel) != stamp),
                         key=lambda rel: (not rel.startswith("requests.parts/"), rel != RUN_JSON, rel))
        for rel in changed:
            try:
                remote.upload_file(self.local / rel, f"{self.url}/{rel}")
            except FileNotFoundError:
                continue  # removed between the listing and the read
            except remote.StorageError as err:
                self.errors += 1
                self._report(str(err))
                return len(changed)  # next pass retries
            self.sent[rel] = files[rel]
        for rel in [r for r in self.sent if r not in files]:
            try:
                remote.delete(f"{self.url}/{rel}")
            except remote.StorageError:
                pass
            del self.sent[rel]
        return len(changed)

    def sync_safely(self) -> None:
        """One pass that never ends the mirror: an error is a line and a retry, like an outage.

        A mirror that died mid-run would upload nothing more, not even the run's
        completion, and the run would read as interrupted. Whatever one pass
        meets, the next pass starts from a fresh listing.
        """
        try:
            self.sync()
        except Exception as err:  # noqa: BLE001 (any error: the mirror must outlive it and say it)
            self.errors += 1
            self._report(f"{self.local}: {type(err).__name__}: {err}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.storage.sync")
    p.add_argument("local", type=Path)
    p.add_argument("url")
    p.add_argument("--interval", type=float, default=INTERVAL_S)
    args = p.parse_args(argv)
    mirror = Mirror(args.local, args.url)
    done = threading.Event()
    watch_for_eof(done)
    # Ctrl-C reaches the whole process group: the run stops gracefully and closes the pipe, and
    # this child must live on to upload the end. A SIGTERM of its own ends it after a last pass.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    while not done.wait(args.interval):
        mirror.sync_safely()
    for _ in range(3):  # the last parts, the merged records, the reports; retried if a pass failed
        before = mirror.errors
        mirror.sync_safely()
        if mirror.errors == before:
            return 0
        time.sleep(args.interval)
    return 1


class Uploader:
    """The parent's handle on the child: start it, and at the end wait for its last pass."""

    def __init__(self, local: Path, url: str, interval_s: float = INTERVAL_S, log: Path | None = None) -> None:
        self.local, self.url = Path(local), url
        self._log = open(log, "ab") if log else None
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loadtest.storage.sync", str(local), url, "--interval", str(interval_s)],
            stdin=subprocess.PIPE, stdout=self._log or subprocess.DEVNULL, stderr=self._log or None,
        )

    def finish(self, timeout_s: float = 600.0) -> int:
        """Close the pipe (the child's signal to do its last pass) and wait for it."""
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if self._log:
            self._log.close()
        return code

    def unsent(self) -> list[str]:
        """What :func:`unsent_files` finds, once the child has ended."""
        return unsent_files(self.local, self.url)


def unsent_files(local: Path, url: str) -> list[str]:
    """The files of ``local`` (as the mirror sees them) that ``url`` lacks or holds at another size.

    The run says "uploaded" only when this is empty: the child's exit code alone would
    take the child's word for it.
    """
    there = remote.list_files(url)
    return sorted(rel for rel, (size, _) in local_files(local).items() if there.get(rel) != size)


if __name__ == "__main__":
    sys.exit(main())
