"""How many local worker processes ``--workers`` may start: a bound from this machine's cores.

A worker is one Python process with one gevent loop, so it uses at most one core. Workers beyond
the cores this process may run on share those cores: they add no load, only more processes
competing for the CPU that times the chunks (the self-check then flags the client, and the
spawning itself takes seconds per worker: ``--workers 1000`` on two cores started 51 processes in
15 s before the run could begin). A few more than the cores is harmless (one may wait on the
network while another parses), so it is a warning; beyond :data:`MAX_WORKERS_PER_CORE` times the
cores it is a mistake (usually a typo, or a count meant for ``--master`` and several hosts).
"""

from __future__ import annotations

import os

from loadtest.errors import InputError

#: More local workers than this many per core is refused (see the module's docstring).
MAX_WORKERS_PER_CORE = 4


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (a container's or taskset's cpuset), not the host's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows: no affinity mask
        return os.cpu_count() or 1


def local_worker_count(workers: int) -> int:
    """``--workers N`` (-1: one per core this process may use, as ``--workers`` is bounded by)."""
    return usable_cores() if workers < 0 else workers


def check_local_workers(workers: int, cores: int | None = None) -> str | None:
    """Refuse a ``--workers`` count that is not a count or far past the cores; a warning above the cores.

    ``workers`` is the flag's value (-1: one per core). Returns the warning to print, or None.
    """
    cores = usable_cores() if cores is None else cores
    if workers == 0 or workers < -1:
        raise InputError(f"--workers {workers}: a positive number of local worker processes, or -1 for one per core "
                         "(leave it out to run in one process)")
    most = MAX_WORKERS_PER_CORE * cores
    if workers > most:
        raise InputError(f"--workers {workers}: this machine has {cores} core{'s' if cores != 1 else ''}, and a "
                         f"worker uses at most one: more workers than cores cannot add load, only contend for the "
                         f"CPU that times the chunks; give at most {most} ({MAX_WORKERS_PER_CORE} × cores), -1 for "
                         "one per core, or --master with workers on more hosts")
    if workers > cores:
        return (f"--workers {workers} on {cores} core{'s' if cores != 1 else ''}: workers beyond the cores add no "
                "load and may slow the client's own timing (the self-check will say); -1 starts one per core")
    return None
