"""Each connected worker's share of an open loop's arrivals (``MasterSession._stream_of``).

A review: Locust's ``worker_index`` only grows, so workers {0, 2, 3} of 3 (one reconnected, a pod
restarted) made shares ``index % 3`` of 0, 2 and 0: one share sent twice, another never. The master
hands out the lowest share no other connected worker holds, and a worker keeps its own. In a child
interpreter: the module imports Locust, whose gevent patches must not reach pytest's process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    from types import SimpleNamespace
    from loadtest.load.distributed import MasterSession

    master = object.__new__(MasterSession)
    master.streams_of = {}
    master.runner = SimpleNamespace(clients={"a": 1, "b": 1})
    shares = [master._stream_of("a"), master._stream_of("b")]
    master.runner.clients = {"b": 1, "c": 1}  # a left; c joins
    shares += [master._stream_of("c"), master._stream_of("b")]
    master.runner.clients = {"b": 1, "c": 1, "d": 1}
    shares += [master._stream_of("d"), master._stream_of("c")]
    print(shares)
""")


def test_each_connected_worker_gets_its_own_share_whatever_locusts_index():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # a and b: 0 and 1; c takes the share a left, not a third; d the next free one; each keeps its own
    assert done.stdout.strip() == "[0, 1, 0, 1, 2, 0]", done.stdout
