"""Enough file descriptors for the users, checked before any load is sent.

Each closed-loop user (each open-loop sender) holds one keep-alive connection,
so a process with U users needs U descriptors plus its own baseline. Without
them, connections fail with EMFILE ("Too many open files") and the run records
a stream of ``connect`` errors that look like the server's fault. So the limit
is checked first: a soft limit below the need is raised up to the hard limit (as
any server does at start; unprivileged processes may do that), and a hard
limit below the need is one line with the numbers and how to raise it.

The baseline was measured with ``ls /proc/PID/fd`` during a level against the
mock (2026-11-30): a single-process run holds 13 descriptors besides its users
(the log, the epoll and gevent loop, the pipes to the scraper and the judge,
Locust's sockets), a ``--workers`` worker 15, a master 21. Transient files (a
Parquet part being written, run.json, a report) and the web UI come on top, so
the allowance is about twice the largest measured baseline.
"""

from __future__ import annotations

import math
import resource
from typing import TYPE_CHECKING

from loadtest.errors import InputError
from loadtest.load.cores import local_worker_count
from loadtest.load.modes import load_mode

if TYPE_CHECKING:
    from loadtest.run_state import RunOptions
    from loadtest.scenario import Scenario

#: Descriptors a load process needs besides its users' connections (see above).
BASELINE_FDS = 32


class TooFewFileDescriptors(InputError):
    """The hard limit on open files is below what the users need. Exit code 2."""


def fds_needed(users: int) -> int:
    """One connection per user, plus the process's own files and sockets."""
    return users + BASELINE_FDS


def users_per_process(users: int, processes: int) -> int:
    """Locust spreads users evenly over its workers; the busiest gets the rounded-up share."""
    return math.ceil(users / max(1, processes))


def ensure_fds(users: int, where: str = "this process") -> str | None:
    """Make sure a process can open a connection per user; return a note if the limit was raised.

    Raises :class:`TooFewFileDescriptors` when even the hard limit is too low.
    The raised soft limit is inherited by child processes (local workers).
    """
    need = fds_needed(users)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return None
    if hard != resource.RLIM_INFINITY and hard < need:
        raise TooFewFileDescriptors(
            f"{users} users need about {need} open files in {where} (one connection per user + {BASELINE_FDS} "
            f"for the process), but the limit is {soft} and the hard limit {hard}: raise it (`ulimit -n {_advice(need)}` "
            f"in the shell that starts loadtest, `nofile` in /etc/security/limits.conf, or docker run "
            f"--ulimit nofile={_advice(need)}), or spread the users over more processes or hosts (--workers N)"
        )
    target = hard if hard != resource.RLIM_INFINITY else max(need, 65536)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return f"raised the open-file limit of {where} from {soft} to {target} (the hard limit): {users} users need about {need}"


def _advice(need: int) -> int:
    """A round limit comfortably above the need (a power of two, at least 4096)."""
    return max(4096, 1 << (need - 1).bit_length())


def check_file_descriptors(scenario: Scenario, options: RunOptions) -> str | None:
    """A connection per user must fit under the open-file limit of the process that holds it.

    Local workers inherit this process's (possibly raised) limit, so it is checked
    here for the busiest worker's share; remote workers check their own share when
    the master tells them the number of workers.
    """
    users = load_mode(scenario).max_users()
    if options.master:
        return ensure_fds(0, "the master")
    if options.workers:
        n = local_worker_count(options.workers)
        return ensure_fds(users_per_process(users, n), f"each of the {n} worker processes")
    return ensure_fds(users)
