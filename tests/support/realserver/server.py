"""Start a real llama.cpp ``llama-server`` on 127.0.0.1 for the tests (or use ``LOADTEST_REAL_URL``).

The binary comes from :mod:`build_llama_server` (built once per machine, cached
outside the clone); the model is the tiny random-weight GGUF of
:mod:`tiny_model`, written into the test's temporary folder. Setting
``LOADTEST_REAL_URL`` (an OpenAI base URL ending in ``/v1``) points the same
tests at any other server instead; ``LOADTEST_REAL_MODEL`` names its model
(default: the first of ``/v1/models``) and ``LOADTEST_REAL_API_KEY_ENV`` the
variable holding its key. Checks that need llama.cpp's own ``timings`` or
``/metrics`` are skipped for a server that has none.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from support.realserver.build_llama_server import binary_path
from support.realserver.tiny_model import write_tiny_llama


@dataclass
class RealServer:
    base_url: str            # ends in /v1
    model: str
    api_key_env: str | None = None
    is_llama: bool = True    # our own llama-server: timings, /metrics, known slots
    slots: int | None = None
    process: subprocess.Popen | None = None
    log: Path | None = None
    extra: dict = field(default_factory=dict)

    @property
    def root(self) -> str:
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    def metrics(self) -> dict[str, float]:
        """llama.cpp's Prometheus metrics (``--metrics``) as {name: value}."""
        with urllib.request.urlopen(self.root + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name.split("{")[0]] = float(value)
        return out

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
            self.process = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def from_environment() -> RealServer | None:
    """The server named by ``LOADTEST_REAL_URL``, if set."""
    url = os.environ.get("LOADTEST_REAL_URL")
    if not url:
        return None
    url = url.rstrip("/")
    model = os.environ.get("LOADTEST_REAL_MODEL")
    if not model:
        model = _get_json(url + "/models")["data"][0]["id"]
    return RealServer(url, model, api_key_env=os.environ.get("LOADTEST_REAL_API_KEY_ENV"), is_llama=False)


def start_llama_server(
    folder: Path, *, slots: int = 8, ctx_per_slot: int = 1024, threads: int = 1, extra_args: tuple[str, ...] = (),
    layers: int | None = None, writer: Callable[..., Path] = write_tiny_llama, alias: str = "tiny-llama",
) -> RealServer:
    """Write the tiny model and start llama-server on a free port; wait until it is healthy.

    ``layers``: the model's depth (None: the tiny model's own); a deeper one is slower per token.
    ``writer``: which tiny model (:mod:`tiny_model`: the llama, or ``write_tiny_reranker`` for
    ``--reranking``), served under the name ``alias``.
    """
    binary = binary_path()
    if not binary.exists():
        raise RuntimeError(f"llama-server is not built ({binary}); run `make real-server` "
                           "(or set LOADTEST_REAL_URL to test another server)")
    model = writer(folder / f"{alias}.gguf", **({"layers": layers} if layers else {}))
    port = _free_port()
    log = folder / f"llama-server-{port}.log"
    cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--metrics",
           "-np", str(slots), "-c", str(slots * ctx_per_slot), "-t", str(threads), "-tb", str(threads),
           "--alias", alias, "--no-warmup", *extra_args]
    process = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = RealServer(f"http://127.0.0.1:{port}/v1", alias, slots=slots, process=process, log=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            if _get_json(server.root + "/health", timeout=2).get("status") == "ok":
                return server
        except OSError:
            pass
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"llama-server did not become healthy in 120 s: {log.read_text()[-2000:]}")
