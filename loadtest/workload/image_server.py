"""A dataset's image files served over HTTP on 127.0.0.1 (``dataset.images_as: served``).

Some servers cap a data URI's size, and a real deployment's clients often send image URLs the
server fetches, a cost (fetch and decode) that data URIs leave out. With ``images_as: served``
the run starts this server on 127.0.0.1 (an ephemeral port), before the load and stopped after
it, and each row's image *files* go as ``http://127.0.0.1:PORT/TOKEN/N`` URLs: only the files the
datasets name are served (by number, behind a random token), nothing else of the disk. The
target must run on the same host to reach it (127.0.0.1 is the load generator's own address).

It runs in a child process (``python -m loadtest.workload.image_server MANIFEST``): serving
image bytes must not take the load generator's own event loop, whose timing it would disturb.
The parent passes the file→URL map to its users (and to local worker processes, which inherit
the environment) through :data:`URLS_ENV`, a JSON file's path.
"""

from __future__ import annotations

import json
import mimetypes
import os
import secrets
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

from loadtest.errors import InputError
from loadtest.workload.dataset import load_dataset

#: The environment variable naming the JSON map {file: URL} of the served images.
URLS_ENV = "LOADTEST_SERVED_IMAGES"
_START_TIMEOUT_S = 10.0


def served_files(scenario: Any) -> list[str]:
    """The image files of every dataset (the workload's and the classes') whose ``images_as`` is served."""
    specs = [scenario.workload.dataset] + [c.dataset for c in scenario.workload.classes]
    files: set[str] = set()
    for spec in specs:
        if spec is None or spec.images_as != "served":
            continue
        for entry in load_dataset(spec).entries:
            files.update(ref for ref in entry.images or () if not ref.startswith(("http://", "https://", "data:")))
    return sorted(files)


@contextmanager
def serving_images(scenario: Any) -> Iterator[dict[str, str]]:
    """Serve the scenario's served dataset images while the block runs ({} and nothing started when none)."""
    files = served_files(scenario)
    if not files:
        yield {}
        return
    folder = Path(tempfile.mkdtemp(prefix="loadtest-images-"))
    token = secrets.token_hex(8)
    manifest = folder / "manifest.json"
    manifest.write_text(json.dumps({"token": token, "files": files}))
    proc = subprocess.Popen([sys.executable, "-m", "loadtest.workload.image_server", str(manifest)],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout is not None else ""
        if not line.startswith("PORT "):
            raise InputError("dataset.images_as served: the image server on 127.0.0.1 did not start")
        base = f"http://127.0.0.1:{int(line.split()[1])}/{token}"
        urls = {f: f"{base}/{i}{Path(f).suffix}" for i, f in enumerate(files)}
        (folder / "urls.json").write_text(json.dumps(urls))
        previous = os.environ.get(URLS_ENV)
        os.environ[URLS_ENV] = str(folder / "urls.json")
        try:
            yield urls
        finally:
            if previous is None:
                os.environ.pop(URLS_ENV, None)
            else:
                os.environ[URLS_ENV] = previous
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for name in ("manifest.json", "urls.json"):
            (folder / name).unlink(missing_ok=True)
        folder.rmdir()


def served_urls() -> dict[str, str] | None:
    """The file→URL map of the run's image server (None when it serves nothing)."""
    path = os.environ.get(URLS_ENV)
    if not path:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        raise InputError(f"${URLS_ENV}: cannot read the served images' map {path!r}") from None


def _handler(token: str, files: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            parts = self.path.strip("/").split("/")
            index = parts[1].split(".")[0] if len(parts) == 2 and parts[0] == token else ""
            if not index.isdigit() or int(index) >= len(files):
                self.send_error(404)
                return
            path = files[int(index)]
            try:
                data = Path(path).read_bytes()
            except OSError:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", mimetypes.guess_type(path)[0] or "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the run's output is the load's
            return

    return Handler


def main(manifest: str) -> None:
    spec = json.loads(Path(manifest).read_text())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(spec["token"], spec["files"]))
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1])
