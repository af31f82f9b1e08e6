"""The scraper as a child process of ``loadtest run``: off the hot path by construction.

Why a process and not a thread: the load process times every chunk in one
reader thread and runs its users as gevent greenlets; a scraper thread would
share their GIL (parsing a large /metrics page holds it for milliseconds) and
a greenlet would share their event loop. A child process shares neither, so
the self-check's loop lag and reader batch times do not see it; it also runs
at the lowest CPU priority (nice 19), so on a busy machine it is the one that
waits for a core.

Before the first level the parent waits, bounded, until the child has made
its first round of scrapes (the child writes one byte to a pipe): at nice 19
on a busy host its start-up could otherwise take the whole first level, which
then had no scrape, and no server view.

The parent writes the settings as one JSON line on the child's stdin (headers
may hold secrets; argv is visible to every user of the machine) and keeps the
pipe open: closing it, or the parent dying, stops the child, which then
merges its part files into ``server_metrics.parquet``. The API key is read by
the child from the environment variable the scenario names, as the load does.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from loadtest.scrape.sources import scrape_targets

if TYPE_CHECKING:
    from loadtest.scenario import Target

#: How long the parent waits for the child to merge its files after asking it to stop.
STOP_TIMEOUT_S = 15.0
#: How long, beyond one scrape's timeout, the parent waits for the child's first round.
FIRST_ROUND_GRACE_S = 10.0
#: Longest a single scrape may take before it counts as failed (a hung endpoint must not pile up).
MAX_SCRAPE_TIMEOUT_S = 10.0


def scrape_timeout(interval_s: float) -> float:
    """One scrape's timeout: twice the interval, within 1 and :data:`MAX_SCRAPE_TIMEOUT_S` seconds."""
    return min(MAX_SCRAPE_TIMEOUT_S, max(1.0, 2 * interval_s))


def settings_for(target: Target, run_dir: Path, known_signals: Sequence[str] = ()) -> dict[str, Any]:
    """What the child needs: where to scrape, how often, and how to talk to the server.

    ``known_signals`` are the metric names a Prometheus query asks for (the analysis's list;
    passed in, because the scraper does not import the analysis).
    """
    prometheus = target.metrics.prometheus
    return {
        "url": target.metrics_url,
        "targets": scrape_targets(target.metrics_url, list(target.metrics.urls)),
        "prometheus": prometheus.model_dump() if prometheus else None,
        "signals": list(target.metrics.signals),
        "known_signals": list(known_signals),
        "interval_s": target.metrics.interval_s,
        "headers": target.resolved_headers(),  # headers_env values included (sent on stdin, never argv)
        "api_key_env": target.api_key_env,
        "verify_tls": target.verify_tls,
        "ca_bundle": target.ca_bundle,
        "run_dir": str(run_dir),
    }


class ScraperProcess:
    """Start with :meth:`start`, end with :meth:`stop` (idempotent; bounded waits)."""

    def __init__(self, target: Target, run_dir: Path, known_signals: Sequence[str] = ()) -> None:
        self.settings = settings_for(target, run_dir, known_signals)
        self.log_path = Path(run_dir) / "scraper.log"
        self._proc: subprocess.Popen | None = None
        self._ready_r: int | None = None
        #: After :meth:`wait_first_round`: "made", "ended" (the child exited first) or "late" (the wait ran out).
        self.first_round: str | None = None

    @property
    def url(self) -> str:
        prometheus = self.settings.get("prometheus")
        return prometheus["url"] if prometheus else self.settings["url"]

    def start(self) -> "ScraperProcess":
        # stderr is the caller's (its warnings reach the terminal); stdout goes to a log.
        log = open(self.log_path, "w")
        ready_r, ready_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "loadtest.scrape.process"],
                stdin=subprocess.PIPE, stdout=log, stderr=None, text=True, pass_fds=(ready_w,),
            )
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            os.close(ready_w)  # the child's copy is the only writer: its exit ends any wait
            log.close()
        self._ready_r = ready_r
        assert self._proc.stdin is not None
        # The span a Prometheus query covers starts now, not when the niced child gets going.
        settings = {**self.settings, "started_wall": time.time(), "ready_fd": ready_w}
        self._proc.stdin.write(json.dumps(settings) + "\n")
        self._proc.stdin.flush()
        return self

    def wait_first_round(self) -> float:
        """Wait until the child has made its first round of scrapes (or has ended), at most a scrape's
        timeout plus :data:`FIRST_ROUND_GRACE_S`; returns the seconds waited. Never fails the run."""
        fd, self._ready_r = self._ready_r, None
        if fd is None:
            return 0.0
        t0 = time.perf_counter()
        try:
            readable, _, _ = select.select([fd], [], [], scrape_timeout(float(self.settings["interval_s"])) + FIRST_ROUND_GRACE_S)
            # the child's one byte, or the pipe's end when the child exited without writing it
            self.first_round = ("made" if os.read(fd, 1) else "ended") if readable else "late"
        finally:
            os.close(fd)
        return time.perf_counter() - t0

    def first_round_warning(self, waited_s: float) -> str | None:
        """One line for the terminal when the first level may start with no scrape, else None."""
        if self.first_round == "late":
            return (f"server metrics: no round of scrapes after {waited_s:.1f} s; the first level may have none "
                    "(the scraper runs at nice 19: a busy host starves it first)")
        if self.first_round == "ended":
            return f"server metrics: the scraper ended before its first round (see {self.log_path})"
        return None

    @staticmethod
    def _unnice(proc: subprocess.Popen | None) -> None:
        """Give the child the parent's CPU priority back: the load is over, so it no longer yields to
        the timing, and on a busy host at nice 19 it could not write its samples within the stop's wait
        (seen: a 49 s start-up, then killed with nothing written). Needs the right to raise a priority
        (root, CAP_SYS_NICE or RLIMIT_NICE); without it the child stays at 19, as before."""
        if proc is None or proc.returncode is not None:
            return
        try:
            os.setpriority(os.PRIO_PROCESS, proc.pid, os.getpriority(os.PRIO_PROCESS, 0))
        except OSError:  # not permitted, or the child is gone
            pass

    def end_input(self) -> None:
        """Close the child's input: it ends its scraping and exits on its own; :meth:`stop` waits."""
        self._unnice(self._proc)
        try:
            if self._proc is not None and self._proc.stdin is not None and not self._proc.stdin.closed:
                self._proc.stdin.close()
        except OSError:  # already gone: stop() sees to it
            pass

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if self._ready_r is not None:
            os.close(self._ready_r)
            self._ready_r = None
        if proc is None:
            return
        self._unnice(proc)
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _client(settings: dict[str, Any]):
    # httpx: only in the scraper's child process, never in the load process
    import httpx

    headers = {"Accept": "text/plain;version=0.0.4;q=0.9,*/*;q=0.1", **settings.get("headers", {})}
    key_env = settings.get("api_key_env")
    key = os.environ.get(key_env) if key_env else None
    if key and not any(h.lower() == "authorization" for h in headers):
        headers["Authorization"] = f"Bearer {key}"
    verify: Any = bool(settings.get("verify_tls", True))
    if verify and settings.get("ca_bundle"):
        # ssl: only in the scraper's child process, and only for a ca_bundle
        import ssl

        verify = ssl.create_default_context(cafile=settings["ca_bundle"])
    return httpx.Client(
        headers=headers, verify=verify, timeout=scrape_timeout(float(settings["interval_s"])),
        trust_env=False, follow_redirects=True,
    )


def main() -> int:
    """Child entry point: settings on stdin, scrape until stdin closes."""
    # Ctrl-C reaches the whole process group; the run stops gracefully and closes this child's
    # stdin when it is done, so the scraper keeps sampling until then instead of dying mid-import
    # with a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Lowest priority on a shared machine, before the heavy imports: the load process's timing
    # matters, a scrape's does not (each is stamped with its own wall time), so on a busy core
    # the scraper waits, not the client.
    try:
        os.nice(19)
    except OSError:
        pass
    # after os.nice: the child's imports are its own, none of them loaded in the load process
    from loadtest.diskfull import full_disk_message, is_disk_full
    from loadtest.parent_pipe import watch_for_eof
    from loadtest.redact import public_url
    from loadtest.scrape.prometheus import read_prometheus
    from loadtest.scrape.scraper import ScrapeResult, scrape_loop
    from loadtest.scrape.store import SampleWriter

    settings = json.loads(sys.stdin.readline())
    stop = threading.Event()
    watch_for_eof(stop)  # the run's end, or its death: the pipe closes either way
    ready_fd = settings.get("ready_fd")

    def first_round_done() -> None:
        if ready_fd is not None:
            try:
                os.write(ready_fd, b"1")
                os.close(ready_fd)
            except OSError:  # the parent stopped waiting and closed its end
                pass
    targets = [tuple(t) for t in settings.get("targets") or [("", settings["url"])]]

    def warn(result: ScrapeResult, url: str) -> None:
        # userinfo and token-like query values never reach the terminal
        print(
            f"warning: server metrics: {public_url(url)}: {result.message}; the run goes on "
            "(turn scraping off with --no-server-metrics or target.metrics: false)",
            file=sys.stderr, flush=True,
        )

    try:
        writer = SampleWriter(Path(settings["run_dir"]))
        with _client(settings) as client:
            try:
                if settings.get("prometheus"):
                    first_round_done()  # Prometheus scrapes the server itself: nothing to wait for
                    read_prometheus(client, settings, stop, writer)
                else:
                    scrape_loop(client, targets, float(settings["interval_s"]), writer, stop, warn, first_round_done)
            finally:
                writer.close()
    except OSError as err:
        if not is_disk_full(err):
            raise
        # One line, not a traceback: the load process stops the run on its own full disk.
        print(f"warning: server metrics: {full_disk_message(err)}; scraping stopped "
              "(the samples flushed before are kept)", file=sys.stderr, flush=True)
        return 5
    return 0


if __name__ == "__main__":
    sys.exit(main())
