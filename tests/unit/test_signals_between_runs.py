"""SIGTERM in the second run of one process (``run --baseline``'s warm-up run, then the measured one).

A review found it: the first run's gevent watchers stayed; the second run's preflight put a Python
handler on SIGTERM and, leaving it, restored what Python believed was there (the default action)
over libev's, which libev did not reinstall for a second watcher. A SIGTERM during the measured
run's load then killed the process (exit 143). The run's end now releases the watchers
(``orchestrate.release_signals``). The sequence runs in a child: signals are the process's.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import locust  # noqa: F401  (gevent's patches first, as a run has them)
    import os, signal, sys
    from types import SimpleNamespace
    import gevent
    from loadtest.load import orchestrate
    from loadtest.load.stopping import signals_before_the_load

    asked = []

    class Session:
        def __init__(self, name):
            self.name = name

        def request_stop(self, by, sig):
            asked.append((self.name, by, sig))

    record = SimpleNamespace(stopped_by=None, stop_signal=None, complete=True)
    for name in ("warm-up", "measured"):
        with signals_before_the_load(record, lambda: None):
            pass  # the preflight and the warm-up requests
        orchestrate._stop_on_signals(Session(name))  # the load
        if name == "warm-up" and sys.argv[1] == "release":
            orchestrate.release_signals()  # the run's end, as run.py does
    os.kill(os.getpid(), signal.SIGTERM)
    gevent.sleep(0.3)
    print(asked)
""")


def _second_run_sigterm(release: bool) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, "release" if release else "keep"],
                          capture_output=True, text=True, timeout=60)


def test_a_sigterm_in_the_second_runs_load_stops_it_gracefully():
    done = _second_run_sigterm(release=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('measured', 'signal', 'SIGTERM')]", done.stdout  # the measured run's stop, only
    # without the release, the review's finding: the process is killed by the signal
    assert _second_run_sigterm(release=False).returncode in (-15, 143)
