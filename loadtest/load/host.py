"""The machine's load beside the client's own, per level: is a late stamp ours or the host's?

The self-check (:mod:`loadtest.load.monitor`) measures how late the client's
stamps can be, but not why. A client out of CPU and a client starved by other
jobs on a shared CI runner look alike in the delays and need opposite advice:
more worker processes help the first and hurt the second. So each level also
records, from Linux's own accounting:

- ``host_cpus``: cores this process may run on (its affinity), and ``host_cores`` in the machine;
- ``host_busy_pct``: the share of the machine's cores that were busy (``/proc/stat``);
- ``host_others_pct``: that share minus this process's own CPU time: other processes' work;
- ``host_steal_pct``: time a hypervisor gave the cores to other guests;
- ``host_run_queue_mean`` / ``_max``: runnable tasks (``procs_running``), sampled twice a second;
- ``host_cpu_pressure_pct``: PSI's ``some`` share for CPU (``/proc/pressure/cpu``): time at least one
  task waited for a core; None where the kernel has no PSI;
- ``client_run_delay_pct``: time this process's threads were runnable but waiting for a core
  (``/proc/self/task/*/schedstat``), as a share of the level's wall time, summed over threads.

All are None when the file is missing (not Linux, a restricted container):
the level is then judged as before, without a cause.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _cpu_times() -> tuple[float, float, float] | None:
    """(busy, steal, total) seconds of all cores since boot, from /proc/stat's ``cpu`` line."""
    text = _read("/proc/stat")
    if not text or not text.startswith("cpu "):
        return None
    fields = [float(x) for x in text.split("\n", 1)[0].split()[1:]]
    fields += [0.0] * (8 - len(fields))
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    total = user + nice + system + idle + iowait + irq + softirq + steal  # guest time is inside user
    busy = user + nice + system + irq + softirq
    return busy / _TICK, steal / _TICK, total / _TICK


def _procs_running() -> int | None:
    text = _read("/proc/stat")
    for line in (text or "").splitlines():
        if line.startswith("procs_running "):
            return int(line.split()[1])
    return None


def _pressure_total_s() -> float | None:
    """PSI's cumulative CPU ``some`` stall (seconds), or None without PSI."""
    text = _read("/proc/pressure/cpu")
    for line in (text or "").splitlines():
        if line.startswith("some "):
            for part in line.split():
                if part.startswith("total="):
                    return int(part[6:]) / 1e6
    return None


def _run_delay_s() -> float | None:
    """Seconds this process's threads (alive now) have waited on a run queue."""
    total, seen = 0.0, False
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        text = _read(f"/proc/self/task/{tid}/schedstat")
        if text:
            parts = text.split()
            if len(parts) >= 2:
                total += int(parts[1]) / 1e9
                seen = True
    return total if seen else None


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class HostSampler:
    """Marks the machine's counters at a level's start; :meth:`take` turns their change into figures."""

    def __init__(self) -> None:
        self.mark()

    def mark(self) -> None:
        self._wall = time.perf_counter()
        self._own = time.process_time()
        self._cpu = _cpu_times()
        self._psi = _pressure_total_s()
        self._delay = _run_delay_s()
        self._queue: list[int] = []

    def sample(self) -> None:
        """One run-queue reading (the monitor calls this twice a second)."""
        n = _procs_running()
        if n is not None:
            self._queue.append(n)

    def take(self) -> dict[str, float | int | None]:
        """The figures since :meth:`mark` (see the module doc), then mark again."""
        elapsed = max(time.perf_counter() - self._wall, 1e-9)
        own = time.process_time() - self._own
        cores = os.cpu_count() or 1
        out: dict[str, float | int | None] = {
            "host_cpus": _affinity(), "host_cores": cores,
            "host_busy_pct": None, "host_others_pct": None, "host_steal_pct": None,
            "host_run_queue_mean": None, "host_run_queue_max": None,
            "host_cpu_pressure_pct": None, "client_run_delay_pct": None,
        }
        cpu = _cpu_times()
        if cpu is not None and self._cpu is not None:
            busy, steal, total = (a - b for a, b in zip(cpu, self._cpu))
            if total > 0:
                out["host_busy_pct"] = round(100.0 * busy / total, 1)
                # Other processes' share of all cores: the machine's busy time less our own CPU time.
                out["host_others_pct"] = round(max(0.0, 100.0 * (busy - own) / total), 1)
                out["host_steal_pct"] = round(100.0 * steal / total, 1)
        if self._queue:
            out["host_run_queue_mean"] = round(sum(self._queue) / len(self._queue), 2)
            out["host_run_queue_max"] = max(self._queue)
        psi = _pressure_total_s()
        if psi is not None and self._psi is not None:
            out["host_cpu_pressure_pct"] = round(min(100.0, 100.0 * (psi - self._psi) / elapsed), 1)
        delay = _run_delay_s()
        if delay is not None and self._delay is not None:
            out["client_run_delay_pct"] = round(max(0.0, 100.0 * (delay - self._delay) / elapsed), 1)
        self.mark()
        return out
