"""A fleet on 127.0.0.1 for tests and benchmarks: N ``loadtest mock`` replicas behind Debian's nginx,
optionally scraped by Debian's Prometheus. Configs are written into a temporary folder; every
process is started here and stopped here (bounded waits)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator, Sequence

from loadtest.mock.process import MockServer
from support.procs import free_port, reap, stop

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _wait_http(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with _NO_PROXY.open(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer within {timeout:g} s")
        time.sleep(0.1)


def nginx_config(folder: Path, port: int, upstreams: Sequence[str], method: str) -> Path:
    """An nginx.conf proxying 127.0.0.1:port to the upstreams ('least_conn' or 'round_robin')."""
    balance = "least_conn;" if method == "least_conn" else ""
    servers = "\n".join(f"    server {u};" for u in upstreams)
    temp = "\n".join(f"  {kind}_temp_path {folder}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = folder / "nginx.conf"
    conf.write_text(f"""worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
{temp}
  upstream replicas {{
    {balance}
{servers}
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 120s;
    }}
  }}
}}
""")
    return conf


@contextlib.contextmanager
def nginx(folder: Path, upstreams: Sequence[str], method: str) -> Iterator[str]:
    """nginx in front of the upstreams; yields its origin (http://127.0.0.1:PORT)."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = nginx_config(folder, port, upstreams, method)
    proc = subprocess.Popen([NGINX, "-e", str(folder / "error.log"), "-p", str(folder), "-c", str(conf)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        origin = f"http://127.0.0.1:{port}"
        _wait_http(origin + "/health")
        yield origin
    finally:
        stop(proc)
        reap(proc)


@contextlib.contextmanager
def replicas(n: int, flags: Sequence[str]) -> Iterator[list[MockServer]]:
    """``n`` identical mocks on free ports, started together and stopped together."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(MockServer(list(flags), startup_timeout=60)) for _ in range(n)]


@contextlib.contextmanager
def fleet(folder: Path, n: int, flags: Sequence[str], method: str) -> Iterator[tuple[str, list[MockServer]]]:
    """``n`` mocks behind nginx: yields (nginx origin, the mocks)."""
    with replicas(n, flags) as mocks, nginx(folder / "nginx", [f"127.0.0.1:{m.port}" for m in mocks], method) as origin:
        yield origin, mocks


def _wait_targets_up(url: str, n: int, timeout: float = 30.0) -> None:
    """Until Prometheus has scraped every target once (in a cluster it has long been scraping)."""
    query = urllib.parse.urlencode({"query": 'up{job="fleet"} == 1'})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with _NO_PROXY.open(f"{url}/api/v1/query?{query}", timeout=5) as response:
            if len(json.loads(response.read())["data"]["result"]) >= n:
                return
        time.sleep(0.2)
    raise RuntimeError(f"Prometheus did not scrape all {n} targets within {timeout:g} s")


@contextlib.contextmanager
def prometheus(folder: Path, targets: Sequence[str], interval_s: float = 0.5) -> Iterator[str]:
    """Prometheus scraping the targets (host:port) every ``interval_s`` as job 'fleet'; yields its URL."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    ms = int(interval_s * 1000)
    listed = ", ".join(f"'{t}'" for t in targets)
    (folder / "prometheus.yml").write_text(
        f"global:\n  scrape_interval: {ms}ms\n  scrape_timeout: {ms}ms\n"
        f"scrape_configs:\n  - job_name: fleet\n    static_configs:\n      - targets: [{listed}]\n"
    )
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(folder / "prometheus.log", "w"),
    )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_http(url + "/-/ready", timeout=30)
        _wait_targets_up(url, len(targets))
        yield url
    finally:
        stop(proc)
        reap(proc)
