"""A busy host is not a saturated client: say whose fault an untrustworthy level is.

:func:`loadtest.analysis.client_error.judge_client` flags a level whose timing
error bound could flip a verdict. The load stage also recorded the machine's
load beside the client's own (:mod:`loadtest.load.host`). When the client used
little CPU while the machine was busy (other processes' CPU, the client's
threads waiting for a core, CPU pressure, steal), the delay is the host's:
the level is ``host_contended`` instead of ``client_saturated``, and the
advice is a quieter machine, never more worker processes on the same one.

Pure functions over a level's ``client`` record; nothing here knows Locust.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

from loadtest.analysis.results import LevelResult

#: The client is its own bottleneck from this share of one core (as the load stage's CPU limit).
CLIENT_CPU_LIMIT_PCT = 80.0
#: The client's threads waited for a core this share of the time (summed over its threads).
RUN_DELAY_PCT = 10.0
#: ...or at least this share, and at least as long as they ran: a light client's threads wake
#: briefly and the scheduler favours a waking thread, so its waits stay a small share of the
#: wall time however busy the core is (2% of a core used, 9.4% waited, three busy loops on its core).
RUN_DELAY_FLOOR_PCT = 5.0
#: PSI: some task waited for a CPU this share of the time.
PRESSURE_PCT = 20.0
#: A hypervisor took the cores this share of the time.
STEAL_PCT = 10.0
#: Other processes used this share of the machine's cores.
OTHERS_PCT = 75.0
#: PSI: a runnable task waited for a core this share of a level whose client was not delayed: the
#: cores were oversubscribed, and a server on this host waited for them (:func:`shared_host_warning`).
#: A server alone beside the client stayed under it in a trial (13-47%); one beside another job's
#: tests took 90%, and its ITL went from 1.6 ms to 539 ms.
SHARED_PRESSURE_PCT = 50.0


def host_busy_reasons(client: Mapping[str, Any]) -> list[str]:
    """What shows the machine's other work delayed the client (empty when nothing, or nothing was measured).

    The direct evidence is the client's own threads waiting for a core (run delay),
    or a hypervisor's steal. A busy machine alone is not enough where the run delay
    was measured: a client frozen by other means (stopped, paged out) waits without
    being runnable, and a busy neighbour that did not delay it is not the cause.
    Without a run-delay figure (no schedstat) the machine-wide figures decide.
    """
    delay, steal = client.get("client_run_delay_pct"), client.get("host_steal_pct")
    waited = delay is not None and _waited(delay, client.get("cpu_pct"))
    direct = waited or (steal is not None and steal >= STEAL_PCT)
    if delay is not None and not direct:
        return []
    reasons = []
    others, cores = client.get("host_others_pct"), client.get("host_cores")
    if others is not None and others >= OTHERS_PCT:
        reasons.append(f"other processes used {others:.0f}% of {cores} cores")
    if waited:
        reasons.append(f"the client's threads waited for a core {delay:.0f}% of the time")
    pressure = client.get("host_cpu_pressure_pct")
    if pressure is not None and pressure >= PRESSURE_PCT:
        reasons.append(f"CPU pressure {pressure:.0f}%")
    steal = client.get("host_steal_pct")
    if steal is not None and steal >= STEAL_PCT:
        reasons.append(f"steal {steal:.0f}%")
    return reasons


def _waited(delay_pct: float, own_pct: float | None) -> bool:
    """The client's threads waited for a core long enough to be the host's doing.

    10% of the time; or, for a light client, 5% and at least as long as it ran (its own CPU
    share, from the same window): waiting longer than running is the host's work, not its own.
    """
    if delay_pct >= RUN_DELAY_PCT:
        return True
    return own_pct is not None and delay_pct >= RUN_DELAY_FLOOR_PCT and delay_pct >= own_pct


def contention_message(client: Mapping[str, Any]) -> str:
    """The one line that names the cause: the host's figures, the client's own CPU, and what to do."""
    busy = host_busy_reasons(client)
    figures = list(busy)
    others, cores = client.get("host_others_pct"), client.get("host_cores")
    if others is not None and not any(r.startswith("other processes") for r in busy):
        figures.insert(0, f"other processes used {others:.0f}% of {cores} cores")
    own = client.get("cpu_pct")
    own_part = f": the client's own work was {own:.0f}% of a core" if own is not None else ""
    return (f"the host was busy ({'; '.join(figures)}){own_part}; re-run on a quieter machine or a dedicated "
            "runner (more --workers on this host would not help)")


def judge_host(level: LevelResult) -> LevelResult:
    """Turn ``client_saturated`` into ``host_contended`` when the host, not the client, was busy (returned for chaining)."""
    client = level.client or {}
    if not level.client_saturated or not host_busy_reasons(client):
        return level
    own = client.get("cpu_pct")
    own_limit = min(CLIENT_CPU_LIMIT_PCT, client.get("cpu_limit_pct") or CLIENT_CPU_LIMIT_PCT)
    if own is not None and own > own_limit:
        # the client itself was out of CPU (or past the scenario's client_limits.cpu_pct):
        # its own saturation, whatever else ran
        return level
    message = contention_message(client)
    level.client_saturated = False
    level.client_near_limit = False
    level.host_contended = True
    level.client = {**client, "host_contended": True, "saturated_reason": client.get("reason"), "reason": message}
    for sub in level.classes.values():  # a class's level shares the process and the host
        if sub.client_saturated:
            judge_host(sub)
    return level


def shared_host_warning(levels: Sequence[LevelResult], run: Mapping[str, Any]) -> str | None:
    """The warning for levels whose host was oversubscribed while the target ran on it, else None.

    ``host_contended`` judges the client only, rightly: a client that was not delayed measured
    truly. But a server on the same machine (a 127.0.0.1 target) shares its cores with whatever
    else runs there: in a trial another job's tests took one of two cores, llama-server's ITL went
    from 1.6 ms to 539 ms, and run.json's ``host_busy_pct`` 99.6 and ``host_others_pct`` 98.7 were
    the only trace. (``host_others_pct`` counts the server too, which keeps its cores busy on its
    own; the CPU pressure says that tasks waited for a core, which a server alone did not make.)
    """
    target = (run.get("target") or {}).get("base_url")
    if not _on_this_host(target, (run.get("host") or {}).get("hostname")):
        return None
    busy = [lv for lv in levels if lv.status != "no_data" and not lv.host_contended and not lv.client_saturated
            and (lv.client or {}).get("host_cpu_pressure_pct") is not None
            and lv.client["host_cpu_pressure_pct"] >= SHARED_PRESSURE_PCT]
    if not busy:
        return None
    worst = max(busy, key=lambda lv: lv.client["host_cpu_pressure_pct"])
    client = worst.client
    figures = [f"a task waited for a core {client['host_cpu_pressure_pct']:.0f}% of the time (CPU pressure)"]
    if client.get("host_others_pct") is not None:
        figures.append(f"processes other than the client, the server among them, used "
                       f"{client['host_others_pct']:.0f}% of {client.get('host_cores')} cores")
    delay = client.get("client_run_delay_pct")
    waited = f" (its threads waited for a core {delay:.0f}% of the time)" if delay is not None else ""
    where = ", ".join(lv.label for lv in sorted(busy, key=lambda lv: lv.load))
    at = "" if len(busy) == 1 else f"at {worst.label}: "
    return (f"the host's cores were oversubscribed at {where} ({at}{'; '.join(figures)}): the client's "
            f"timing held{waited}, but the target ({urlsplit(target).hostname}) runs on this host and shared "
            "those cores, so its latencies there include the wait for them (another job's work, or the server's own "
            "threads beyond the cores); compare such levels only with a run as busy, or re-run with the host to itself")


def _on_this_host(url: str | None, hostname: str | None) -> bool:
    """Is the target's host this machine (a loopback address, ``localhost``, or the machine's own name)?"""
    host = urlsplit(url).hostname if url else None
    if not host:
        return False
    if host == "localhost" or (hostname and host == hostname.lower()):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified
