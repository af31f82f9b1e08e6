"""The ``run`` flags for monitoring, and the push once the run is over.

Each flag has an environment variable for its default (``LOADTEST_METRICS_PORT``,
``LOADTEST_METRICS_HOST``, ``LOADTEST_PUSHGATEWAY``), so a CronJob can turn them
on without changing the command line it shares with the CI example.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from loadtest.argtypes import port_number
from loadtest.redact import public_url
from loadtest.run_files import SUMMARY_JSON


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("monitoring (Prometheus)")
    port = os.environ.get("LOADTEST_METRICS_PORT")
    g.add_argument("--metrics-port", type=_from_env(port_number, "LOADTEST_METRICS_PORT", port), default=port or None, metavar="P",  # argparse checks a str default
                   help="serve the load generator's own metrics (TTFT/ITL/e2e histograms, requests, users, level, "
                        "verdicts) on this port while the run goes, on the master when distributed ($LOADTEST_METRICS_PORT)")
    g.add_argument("--metrics-host", default=os.environ.get("LOADTEST_METRICS_HOST", "127.0.0.1"),
                   help="interface for --metrics-port (default 127.0.0.1; 0.0.0.0 in a pod) ($LOADTEST_METRICS_HOST)")
    gateway = os.environ.get("LOADTEST_PUSHGATEWAY") or None
    g.add_argument("--pushgateway", type=_from_env(pushgateway_url, "LOADTEST_PUSHGATEWAY", gateway), default=gateway, metavar="URL",  # argparse checks a str default
                   help="push the summary (capacity, per-level percentiles, verdicts) to this Prometheus Pushgateway "
                        "when the run ends, http(s)://[user:password@]host[:port] or host:port; a user and password are sent as "
                        "HTTP Basic auth ($LOADTEST_PUSHGATEWAY)")


def _from_env(parse: Callable[[str], Any], variable: str, env_value: str | None) -> Callable[[str], Any]:
    """``parse``, whose error names ``$variable`` when the bad value came from it, not from the flag."""

    def parse_from_env(text: str) -> Any:
        try:
            return parse(text)
        except argparse.ArgumentTypeError as err:
            if env_value is not None and text == env_value:
                raise argparse.ArgumentTypeError(f"{err} (from ${variable})") from None
            raise

    parse_from_env.__name__ = parse.__name__  # argparse names the type in its messages
    return parse_from_env


def pushgateway_url(text: str) -> str:
    """A Pushgateway URL the push can use, checked with the arguments, so before any load.

    The push comes after the whole run: a URL that could never work (``notaurl``, a port
    out of range) was found only then, the measured run's summary lost for it. The
    message shows the URL with its credentials redacted. A bare ``host:port`` means
    ``http://host:port``, as prometheus_client reads it.
    """
    expected = "expected http(s)://[user:password@]host[:port] or host:port"
    if "://" not in text:  # host:port, as prometheus_client takes it (and this flag always did): plain http
        if ":" not in text.rsplit("@", 1)[-1]:  # a bare word ("notaurl") is a typo more often than a host
            raise argparse.ArgumentTypeError(f"{public_url(text)!r}: {expected}")
        text = "http://" + text
    shown = public_url(text)
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in text):
        raise argparse.ArgumentTypeError(f"{shown!r}: must not contain spaces or control characters; {expected}")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as err:  # an unclosed IPv6 bracket, a port out of range or not a number
        raise argparse.ArgumentTypeError(f"{shown!r}: not a valid URL ({err}); {expected}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{shown!r}: {expected}")
    if port == 0:
        raise argparse.ArgumentTypeError(f"{shown!r}: port 0; {expected}")
    return text


def check_metrics_port(host: str, port: int) -> None:
    """Refuse a port that is taken before any load is sent (one line, exit 2)."""
    check_port_free("--metrics-port", host, port)


def check_port_free(arg: str, host: str, port: int, *, interface_names: bool = False) -> None:
    """Refuse a port the run would listen on that is taken (or a host it cannot bind), before any load.

    The probe binds as the listeners do (SO_REUSEADDR, IPv6 when the host has a ``:``), so a port
    in TIME_WAIT or an IPv6 host such as ``::1`` is not refused. With ``interface_names`` (ZeroMQ's
    ``--master-bind-host``, which also takes an interface name such as ``eth0``), a host that is
    not an IP address is left to the listener to judge.
    """
    # socket, ipaddress: only to probe a port before any load is sent
    import ipaddress
    import socket

    from loadtest.errors import InputError

    if interface_names and host:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as err:
        why = str(err.strerror or err)
        shown = f"[{host}]" if ":" in host else (host or "*")
        raise InputError(f"{arg} {port}: cannot listen on {shown}:{port}: {why}") from None


def push_after_run(gateway: str, run_dir: Path) -> None:
    """Push the summary; a gateway that is down costs a warning, never the measured run."""
    # prometheus_client: only when --push-gateway is given
    from loadtest.export.push import push_summary

    shown = public_url(gateway)
    summary = Path(run_dir) / SUMMARY_JSON
    if not summary.is_file():
        print(f"warning: --pushgateway {shown}: no summary.json in {run_dir}; nothing pushed", file=sys.stderr)
        return
    try:
        push_summary(gateway, summary)
    except OSError as err:  # urllib's URLError and HTTPError are OSErrors
        print(f"warning: --pushgateway {shown}: the summary was not pushed ({err})", file=sys.stderr)
        return
    print(f"pushed the summary to {shown}", file=sys.stderr)
