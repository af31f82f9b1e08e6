"""The flags the Locust Kubernetes operator appends to a ``LocustTest``'s commands.

The operator (``locust.io/v2``) runs the image with ``args`` = the resource's
``master.command``/``worker.command`` split on spaces, plus Locust's own flags:
``--master --master-port=5557 --expect-workers=N --autostart --autoquit 60
--enable-rebalancing --only-summary`` (and ``--otel`` when asked), and ``--worker
--master-port=5557 --master-host=…``. The image's entrypoint is ``loadtest``, so
``loadtest run --master`` and ``loadtest worker`` accept these: ``--master-port``
is ``--master-bind-port``; the others describe what a loadtest run does anyway
(it starts once the workers are there, quits when the levels are done, moves a
lost worker's users to the others, and prints a summary), so they change nothing.
They are hidden from ``--help``.
"""

from __future__ import annotations

import argparse

from loadtest.argtypes import port_number

_NO_OPS = ("--autostart", "--enable-rebalancing", "--only-summary", "--otel")


def add_master_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master-port", dest="master_bind_port", type=port_number, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument("--autoquit", type=float, default=None, help=argparse.SUPPRESS)
    for flag in _NO_OPS:
        p.add_argument(flag, action="store_true", dest=f"_operator_{flag[2:].replace('-', '_')}", help=argparse.SUPPRESS)


def add_worker_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--worker", action="store_true", dest="_operator_worker", help=argparse.SUPPRESS)
    p.add_argument("--otel", action="store_true", dest="_operator_otel", help=argparse.SUPPRESS)
